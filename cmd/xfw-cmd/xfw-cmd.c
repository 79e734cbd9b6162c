/* SPDX-License-Identifier: GPL-2.0 */
/*
 * xfw-cmd.c — the small client of the xfw agent's command server: what the
 * iptables alternatives (iptables-xfw, ip6tables-xfw-restore, …) link to.
 *
 * A command run through xfw itself pays for starting a 17 MB Go program
 * (about 3 ms) before it asks the agent; this client starts in well under
 * one. It speaks the protocol of internal/cli/cmdproto.go (the Go client is
 * cmdclient.go, the server cmdserver.go): connect to the abstract socket
 * "xfw/cmd" of the network namespace, send the request (build id, argv,
 * XFW_* environment) with stdin, stdout and stderr by SCM_RIGHTS, wait for
 * 'S' (or 'D': declined), send 'G', then wait for 'E' and the exit status,
 * heartbeats ('H') in between.
 *
 * The build id sent is the xfw binary's beside this one (the one the
 * fallback runs), read from its Go build-id note: the agent serves only
 * when it is that build. In every case where the command was not handed
 * over (no agent, declined, no answer within the handshake's 2 s) this
 * client runs xfw itself, exec'ing it with the same argv and
 * XFW_CMDSERVER=off, so the command runs exactly once. XFW_CMDSERVER=off
 * skips the agent; =only fails instead of falling back (tests).
 *
 * Built by `make build` (bin/xfw-cmd) with the system's C compiler; it uses
 * libc only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <stddef.h>

extern char **environ;

/* The protocol's constants (internal/cli/cmdproto.go). */
#define SOCKET_NAME "xfw/cmd"
#define MAX_REQUEST (64 << 10)
#define NOTE_SEARCH_BYTES (8 << 10)
#define GO_BUILD_ID_NOTE 4
#define HANDSHAKE_MS 2000 /* handshakeTimeout */
#define SILENCE_MS 5000   /* silenceTimeout */
#define EXIT_OTHER 1      /* iptables' OTHER_PROBLEM */
#define SERVER_ENV "XFW_CMDSERVER"

static char xfw_path[PATH_MAX];

/* request is the message being built. */
struct request {
	unsigned char buf[MAX_REQUEST];
	size_t len;
	int overflow;
};

static void put_uvarint(struct request *r, uint64_t v)
{
	do {
		unsigned char b = v & 0x7f;

		v >>= 7;
		if (v)
			b |= 0x80;
		if (r->len >= sizeof(r->buf)) {
			r->overflow = 1;
			return;
		}
		r->buf[r->len++] = b;
	} while (v);
}

static void put_str(struct request *r, const char *s, size_t n)
{
	put_uvarint(r, n);
	if (r->overflow || n > sizeof(r->buf) - r->len) {
		r->overflow = 1;
		return;
	}
	memcpy(r->buf + r->len, s, n);
	r->len += n;
}

static uint32_t le32(const unsigned char *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* read_build_id puts the Go build id of the xfw binary in id (findGoBuildID
 * of cmdproto.go); its length, or 0 when none is found. */
static size_t read_build_id(char *id, size_t cap)
{
	static unsigned char head[NOTE_SEARCH_BYTES];
	static const unsigned char owner[4] = {'G', 'o', 0, 0};
	const int hdr = 12; /* namesz, descsz, type */
	ssize_t n;
	int fd = open(xfw_path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = pread(fd, head, sizeof(head), 0);
	close(fd);
	for (ssize_t at = hdr; n > 0 && at + 4 <= n; at++) {
		uint32_t descsz;
		size_t end;

		if (memcmp(head + at, owner, 4) != 0)
			continue;
		descsz = le32(head + at - hdr + 4);
		end = at + 4 + descsz;
		if (le32(head + at - hdr) != 4 || le32(head + at - hdr + 8) != GO_BUILD_ID_NOTE ||
		    descsz == 0 || end > (size_t)n || descsz > cap)
			continue;
		memcpy(id, head + at + 4, descsz);
		return descsz;
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* build_request renders the request: build id, argv (the front end's name
 * first), the XFW_* environment but XFW_CMDSERVER, sorted. */
static int build_request(struct request *r, const char *name, int argc, char **argv)
{
	char id[256];
	size_t idlen = read_build_id(id, sizeof(id));
	char *env[256];
	size_t nenv = 0;

	if (idlen == 0)
		return -1;
	put_str(r, id, idlen);
	put_uvarint(r, argc);
	put_str(r, name, strlen(name));
	for (int i = 1; i < argc; i++)
		put_str(r, argv[i], strlen(argv[i]));
	for (char **e = environ; *e; e++) {
		if (strncmp(*e, "XFW_", 4) != 0 || strncmp(*e, SERVER_ENV "=", strlen(SERVER_ENV) + 1) == 0)
			continue;
		if (nenv == sizeof(env) / sizeof(env[0]))
			return -1;
		env[nenv++] = *e;
	}
	qsort(env, nenv, sizeof(env[0]), cmp_str);
	put_uvarint(r, nenv);
	for (size_t i = 0; i < nenv; i++)
		put_str(r, env[i], strlen(env[i]));
	return r->overflow ? -1 : 0;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* receive reads one message within timeout_ms; its length, or -1. */
static ssize_t receive(int fd, unsigned char *buf, size_t cap, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;

	for (;;) {
		long left = deadline - now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int n;
		ssize_t m;

		if (left <= 0)
			return -1;
		n = poll(&p, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			continue;
		m = read(fd, buf, cap);
		if (m < 0 && errno == EINTR)
			continue;
		return m > 0 ? m : -1;
	}
}

/* connect_server connects to the namespace's agent; -1 when none listens
 * or its backlog is full (a stopped agent): the connect is non-blocking, so
 * the client never waits for an agent that does not accept. */
static int connect_server(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(SOCKET_NAME);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	memcpy(sa.sun_path + 1, SOCKET_NAME, strlen(SOCKET_NAME)); /* abstract: leading NUL */
	if (connect(fd, (struct sockaddr *)&sa, len) < 0 || fcntl(fd, F_SETFL, 0) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* send_request sends r with the three standard streams. */
static int send_request(int fd, const struct request *r)
{
	int fds[3] = {0, 1, 2};
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = (void *)r->buf, .iov_len = r->len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)r->len ? 0 : -1;
}

/* served runs the command in the agent. It returns the command's exit
 * status, or -1 (why in *why) when the command was not handed over and is
 * to run here. */
static int served(const char *name, int argc, char **argv, const char **why)
{
	static struct request r;
	unsigned char reply[512];
	ssize_t n;
	int fd;

	if (build_request(&r, name, argc, argv) < 0) {
		*why = "no build id, or the request is too long";
		return -1;
	}
	fd = connect_server();
	if (fd < 0) {
		*why = "no agent serves this namespace";
		return -1;
	}
	if (send_request(fd, &r) < 0) {
		*why = "send failed";
		close(fd);
		return -1;
	}
	n = receive(fd, reply, sizeof(reply) - 1, HANDSHAKE_MS);
	if (n <= 0 || reply[0] != 'S') {
		static char msg[600];

		if (n > 0 && reply[0] == 'D') {
			reply[n] = 0;
			snprintf(msg, sizeof(msg), "declined: %s", (char *)reply + 1);
			*why = msg;
		} else {
			*why = "no answer";
		}
		close(fd);
		return -1;
	}
	if (write(fd, "G", 1) != 1) {
		*why = "send failed";
		close(fd);
		return -1;
	}
	/* Handed over: from here on the agent's end is the command's. */
	for (;;) {
		n = receive(fd, reply, sizeof(reply), SILENCE_MS);
		if (n == 1 && reply[0] == 'H')
			continue;
		if (n == 5 && reply[0] == 'E')
			return (int)(int32_t)le32(reply + 1) & 0xff;
		fprintf(stderr, "xfw: the xfw agent serving this command %s; it may or may not have taken effect (a change is applied whole or not at all)\n",
			n < 0 ? "stopped answering" : "sent an unexpected answer");
		return EXIT_OTHER;
	}
}

/* front_end is the command's name as the agent knows it: the alternatives'
 * names (iptables-xfw-restore) without their "-xfw". */
static void front_end(const char *arg0, char *out, size_t cap)
{
	const char *base = strrchr(arg0, '/');
	const char *x;

	base = base ? base + 1 : arg0;
	snprintf(out, cap, "%s", base);
	x = strstr(out, "-xfw");
	if (x)
		memmove((char *)x, x + 4, strlen(x + 4) + 1);
}

/* find_xfw puts the path of the xfw binary beside this one in xfw_path. */
static int find_xfw(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return -1;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	return snprintf(xfw_path, sizeof(xfw_path), "%s/xfw", self) < (int)sizeof(xfw_path) ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *mode = getenv(SERVER_ENV);
	const char *why = "";
	char name[NAME_MAX + 1];

	if (argc < 1 || find_xfw() < 0) {
		fprintf(stderr, "xfw-cmd: cannot find the xfw binary beside this one\n");
		return EXIT_OTHER;
	}
	front_end(argv[0], name, sizeof(name));
	if (strcmp(name, "xfw-cmd") == 0 && argc > 1) {
		/* xfw-cmd iptables ARGS… */
		argv++;
		argc--;
		front_end(argv[0], name, sizeof(name));
	}
	if (!mode || strcmp(mode, "off") != 0) {
		int code = served(name, argc, argv, &why);

		if (code >= 0)
			return code;
		if (mode && strcmp(mode, "only") == 0) {
			fprintf(stderr, "%s: not served by the xfw agent: %s\n", name, why);
			return EXIT_OTHER;
		}
	}
	/* Not handed over: xfw runs it, without asking the agent again. */
	setenv(SERVER_ENV, "off", 1);
	execv(xfw_path, argv);
	fprintf(stderr, "xfw-cmd: exec %s: %s\n", xfw_path, strerror(errno));
	return EXIT_OTHER;
}
