package ipset

// helpText is ipset 7.17's help with the set types xfw serves (ipset lists
// every revision of every type the kernel module offers).
const helpText = "ipset v7.17\n" +
	"\n" +
	"Usage: ipset [options] COMMAND\n" +
	"\n" +
	"Commands:\n" +
	"create SETNAME TYPENAME [type-specific-options]\n" +
	"        Create a new set\n" +
	"add SETNAME ENTRY\n" +
	"        Add entry to the named set\n" +
	"del SETNAME ENTRY\n" +
	"        Delete entry from the named set\n" +
	"test SETNAME ENTRY\n" +
	"        Test entry in the named set\n" +
	"destroy [SETNAME]\n" +
	"        Destroy a named set or all sets\n" +
	"list [SETNAME]\n" +
	"        List the entries of a named set or all sets\n" +
	"save [SETNAME]\n" +
	"        Save the named set or all sets to stdout\n" +
	"restore \n" +
	"        Restore a saved state\n" +
	"flush [SETNAME]\n" +
	"        Flush a named set or all sets\n" +
	"rename FROM-SETNAME TO-SETNAME\n" +
	"        Rename two sets\n" +
	"swap FROM-SETNAME TO-SETNAME\n" +
	"        Swap the contect of two existing sets\n" +
	"help [TYPENAME]\n" +
	"        Print help, and settype specific help\n" +
	"version \n" +
	"        Print version information\n" +
	"quit \n" +
	"        Quit interactive mode\n" +
	"\n" +
	"Options:\n" +
	"-o plain|save|xml\n" +
	"       Specify output mode for listing sets.\n" +
	"       Default value for \"list\" command is mode \"plain\"\n" +
	"       and for \"save\" command is mode \"save\".\n" +
	"-s \n" +
	"        Print elements sorted (if supported by the set type).\n" +
	"-q \n" +
	"        Suppress any notice or warning message.\n" +
	"-r \n" +
	"        Try to resolve IP addresses in the output (slow!)\n" +
	"-! \n" +
	"        Ignore errors when creating or adding sets or\n" +
	"        elements that do exist or when deleting elements\n" +
	"        that don't exist.\n" +
	"-n \n" +
	"        When listing, just list setnames from the kernel.\n" +
	"\n" +
	"-t \n" +
	"        When listing, list setnames and set headers\n" +
	"        from kernel only.\n" +
	"-f \n" +
	"        Read from the given file instead of standard\n" +
	"        input (restore) or write to given file instead\n" +
	"        of standard output (list/save).\n" +
	"\n" +
	"Supported set types:\n" +
	"    list:set\t\t3\tskbinfo support\n" +
	"    list:set\t\t2\tcomment support\n" +
	"    list:set\t\t1\tcounters support\n" +
	"    list:set\t\t0\tInitial revision\n" +
	"    hash:net,iface\t8\tbucketsize, initval support\n" +
	"    hash:net,iface\t7\tskbinfo and wildcard support\n" +
	"    hash:net,iface\t6\tskbinfo support\n" +
	"    hash:net,iface\t5\tforceadd support\n" +
	"    hash:net,iface\t4\tcomment support\n" +
	"    hash:net,iface\t3\tcounters support\n" +
	"    hash:net,iface\t2\t/0 network support\n" +
	"    hash:net,iface\t1\tnomatch flag support\n" +
	"    hash:net,iface\t0\tInitial revision\n" +
	"    hash:net,port\t8\tbucketsize, initval support\n" +
	"    hash:net,port\t7\tskbinfo support\n" +
	"    hash:net,port\t6\tforceadd support\n" +
	"    hash:net,port\t5\tcomment support\n" +
	"    hash:net,port\t4\tcounters support\n" +
	"    hash:net,port\t3\tnomatch flag support\n" +
	"    hash:net,port\t2\tAdd/del range support\n" +
	"    hash:net,port\t1\tSCTP and UDPLITE support\n" +
	"    hash:net\t\t7\tbucketsize, initval support\n" +
	"    hash:net\t\t6\tskbinfo support\n" +
	"    hash:net\t\t5\tforceadd support\n" +
	"    hash:net\t\t4\tcomment support\n" +
	"    hash:net\t\t3\tcounters support\n" +
	"    hash:net\t\t2\tnomatch flag support\n" +
	"    hash:net\t\t1\tAdd/del range support\n" +
	"    hash:net\t\t0\tInitial revision\n" +
	"    hash:ip,port\t7\tnetmask and bitmask support\n" +
	"    hash:ip,port\t6\tbucketsize, initval support\n" +
	"    hash:ip,port\t5\tskbinfo support\n" +
	"    hash:ip,port\t4\tforceadd support\n" +
	"    hash:ip,port\t3\tcomment support\n" +
	"    hash:ip,port\t2\tcounters support\n" +
	"    hash:ip,port\t1\tSCTP and UDPLITE support\n" +
	"    hash:ip\t\t6\tbitmask support\n" +
	"    hash:ip\t\t5\tbucketsize, initval support\n" +
	"    hash:ip\t\t4\tskbinfo support\n" +
	"    hash:ip\t\t3\tforceadd support\n" +
	"    hash:ip\t\t2\tcomment support\n" +
	"    hash:ip\t\t1\tcounters support\n" +
	"    hash:ip\t\t0\tInitial revision\n" +
	"    bitmap:port\t\t3\tskbinfo support\n" +
	"    bitmap:port\t\t2\tcomment support\n" +
	"    bitmap:port\t\t1\tcounters support\n" +
	"    bitmap:port\t\t0\tInitial revision\n"
