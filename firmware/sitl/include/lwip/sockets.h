// lwip/sockets.h - SITL stand-in for lwIP's BSD socket API. As lwIP does
// (LWIP_COMPAT_SOCKETS), the POSIX names are macros for lwip_* functions;
// here those run on the host's sockets behind a virtual Wi-Fi interface: the
// car's own loopback address (INADDR_ANY binds to it), sends only inside the
// simulated network (127.0.0.0/8, or 198.18.0.0/15 in a test namespace), and
// nothing in or out while the world holds the link down.
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

int lwip_socket(int domain, int type, int protocol);
int lwip_bind(int s, const struct sockaddr *name, socklen_t namelen);
int lwip_listen(int s, int backlog);
int lwip_accept(int s, struct sockaddr *addr, socklen_t *addrlen);
int lwip_setsockopt(int s, int level, int optname, const void *optval, socklen_t optlen);
ssize_t lwip_recvfrom(int s, void *mem, size_t len, int flags, struct sockaddr *from,
                      socklen_t *fromlen);
ssize_t lwip_sendto(int s, const void *data, size_t size, int flags, const struct sockaddr *to,
                    socklen_t tolen);
ssize_t lwip_recv(int s, void *mem, size_t len, int flags);
ssize_t lwip_send(int s, const void *data, size_t size, int flags);
int lwip_close(int s);

#define socket(domain, type, protocol) lwip_socket(domain, type, protocol)
#define bind(s, name, namelen) lwip_bind(s, name, namelen)
#define listen(s, backlog) lwip_listen(s, backlog)
#define accept(s, addr, addrlen) lwip_accept(s, addr, addrlen)
#define setsockopt(s, level, optname, opval, optlen) lwip_setsockopt(s, level, optname, opval, optlen)
#define recvfrom(s, mem, len, flags, from, fromlen) lwip_recvfrom(s, mem, len, flags, from, fromlen)
#define sendto(s, dataptr, size, flags, to, tolen) lwip_sendto(s, dataptr, size, flags, to, tolen)
#define recv(s, mem, len, flags) lwip_recv(s, mem, len, flags)
#define send(s, dataptr, size, flags) lwip_send(s, dataptr, size, flags)
#define close(s) lwip_close(s)
