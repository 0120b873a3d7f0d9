// lwip.cpp - lwIP's socket calls for the SITL car (see lwip/sockets.h): host
// sockets behind a virtual Wi-Fi interface at the car's loopback address.
#include "lwip/sockets.h"

#undef socket
#undef bind
#undef listen
#undef accept
#undef setsockopt
#undef recvfrom
#undef sendto
#undef recv
#undef send
#undef close

#include <errno.h>
#include <string.h>
#include <time.h>

#include "sitl.h"

namespace sitl {

// Inside one simulated network: loopback, or the 198.18.0.0/15 network of
// namespaces a test made. The world's rule (worlds/server.py), never beyond.
bool same_sim_network(uint32_t a, uint32_t b)
{
    const bool loop_a = (a >> 24) == 127;
    const bool loop_b = (b >> 24) == 127;
    const bool bench_a = (a & 0xFFFE0000u) == 0xC6120000u;
    const bool bench_b = (b & 0xFFFE0000u) == 0xC6120000u;
    return (loop_a && loop_b) || (bench_a && bench_b);
}

}  // namespace sitl

namespace {

const char *proto_name(int s)
{
    int type = 0;
    socklen_t len = sizeof type;
    getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &len);
    return type == SOCK_STREAM ? "tcp" : type == SOCK_DGRAM ? "udp" : "other";
}

double send_timeout_s(int s)
{
    timeval tv = {0, 0};
    socklen_t len = sizeof tv;
    getsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, &len);
    const double t = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
    return t > 0.0 ? t : 3600.0;
}

}  // namespace

int lwip_socket(int domain, int type, int protocol)
{
    return socket(domain, type | SOCK_CLOEXEC, protocol);
}

// INADDR_ANY is the car's interface address; any other address is not ours.
int lwip_bind(int s, const struct sockaddr *name, socklen_t namelen)
{
    if (name == nullptr || namelen < (socklen_t)sizeof(sockaddr_in) || name->sa_family != AF_INET) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    sockaddr_in addr;
    memcpy(&addr, name, sizeof addr);
    const uint32_t ip = ntohl(addr.sin_addr.s_addr);
    if (ip != INADDR_ANY && ip != sitl::options().address_ip) {
        errno = EADDRNOTAVAIL;
        return -1;
    }
    addr.sin_addr.s_addr = htonl(sitl::options().address_ip);
    const int r = bind(s, reinterpret_cast<const sockaddr *>(&addr), sizeof addr);
    const int err = r == 0 ? 0 : errno;
    sitl::world_sendf('B', "{\"proto\":\"%s\",\"port\":%u,\"errno\":%d,\"error\":\"%s\"}",
                      proto_name(s), (unsigned)ntohs(addr.sin_port), err,
                      err != 0 ? strerror(err) : "");
    errno = err;
    return r;
}

int lwip_listen(int s, int backlog)
{
    return listen(s, backlog);
}

int lwip_accept(int s, struct sockaddr *addr, socklen_t *addrlen)
{
    return accept4(s, addr, addrlen, SOCK_CLOEXEC);
}

int lwip_setsockopt(int s, int level, int optname, const void *optval, socklen_t optlen)
{
    return setsockopt(s, level, optname, optval, optlen);
}

// A datagram that arrives while the link is down is lost in the air.
ssize_t lwip_recvfrom(int s, void *mem, size_t len, int flags, struct sockaddr *from,
                      socklen_t *fromlen)
{
    const ssize_t n = recvfrom(s, mem, len, flags, from, fromlen);
    if (n >= 0 && !sitl::link_up()) {
        errno = EAGAIN;
        return -1;
    }
    return n;
}

ssize_t lwip_sendto(int s, const void *data, size_t size, int flags, const struct sockaddr *to,
                    socklen_t tolen)
{
    if (to == nullptr || tolen < (socklen_t)sizeof(sockaddr_in) || to->sa_family != AF_INET) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    sockaddr_in dst;
    memcpy(&dst, to, sizeof dst);
    if (!sitl::same_sim_network(sitl::options().address_ip, ntohl(dst.sin_addr.s_addr))) {
        errno = ENETUNREACH;  // never beyond the simulated network
        return -1;
    }
    if (!sitl::link_up()) {
        return (ssize_t)size;  // sent into a dead link: lost
    }
    return sendto(s, data, size, flags | MSG_NOSIGNAL, to, tolen);
}

ssize_t lwip_recv(int s, void *mem, size_t len, int flags)
{
    return recv(s, mem, len, flags);
}

// TCP holds its bytes while the link is down, up to the send timeout.
ssize_t lwip_send(int s, const void *data, size_t size, int flags)
{
    const double give_up = sitl::mono_now() + send_timeout_s(s);
    while (!sitl::link_up()) {
        if (sitl::mono_now() > give_up) {
            errno = EAGAIN;
            return -1;
        }
        const timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, nullptr);
    }
    return send(s, data, size, flags | MSG_NOSIGNAL);
}

int lwip_close(int s)
{
    return close(s);
}
