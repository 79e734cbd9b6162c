#!/usr/bin/env python3
"""geoip2fast_prefixes.py DAT_GZ OUT — write the networks of a geoip2fast
country database (a gzip'd pickle shipped in the PyPI package geoip2fast) as
one CIDR prefix per line. IPv4 networks are stored as integers below 2**32,
IPv6 networks as integers at or above (the package's own convention:
numIPsv4[0] = 2**32 marks the start of IPv6); netlengths are prefix lengths.
"""
import gzip
import ipaddress
import pickle
import sys


def main() -> None:
    dat_gz, out_path = sys.argv[1], sys.argv[2]
    with gzip.open(dat_gz, "rb") as f:
        version, source_info, _total, database = pickle.load(f)
    if version not in (120, 121) or not source_info.get("country") or source_info.get("asn"):
        sys.exit(f"unsupported geoip2fast database (version {version}, {source_info.get('info')})")
    _index, _names, first_ips, _codes, netlengths = database
    count = 0
    with open(out_path, "w") as out:
        for chunk_first, chunk_len in zip(first_ips, netlengths):
            for first, length in zip(chunk_first, chunk_len):
                if first < 2**32:
                    net = ipaddress.IPv4Network((first, length))
                else:
                    net = ipaddress.IPv6Network((first, length))
                out.write(f"{net}\n")
                count += 1
    print(f"{out_path}: {count} prefixes", file=sys.stderr)


if __name__ == "__main__":
    main()
