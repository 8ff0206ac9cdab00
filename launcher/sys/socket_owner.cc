#include "launcher/sys/socket_owner.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {
namespace {

// One endpoint in the form inet_diag_sockid wants: the port in network order and the address
// as four 32-bit words (IPv4: the first word).
struct DiagEnd {
  int family = AF_UNSPEC;
  __be16 port = 0;
  std::array<__be32, 4> addr{};
};

// IPv4 stays IPv4; a v4-mapped IPv6 address becomes its IPv4 address (the kernel keeps such
// connections among the IPv4 ones); other IPv6 stays IPv6.
DiagEnd ToDiagEnd(const sockaddr_storage& ss) {
  DiagEnd end;
  if (ss.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    end.family = AF_INET;
    end.port = in.sin_port;
    end.addr[0] = in.sin_addr.s_addr;
  } else if (ss.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(ss);
    end.port = in6.sin6_port;
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      end.family = AF_INET;
      std::memcpy(end.addr.data(), &in6.sin6_addr.s6_addr[12], 4);
    } else {
      end.family = AF_INET6;
      std::memcpy(end.addr.data(), in6.sin6_addr.s6_addr, 16);
    }
  }
  return end;
}

// TCP states (include/net/tcp_states.h) whose sockets carry no owner.
constexpr int kSynRecv = 3;
constexpr int kTimeWait = 6;
constexpr int kNewSynRecv = 12;

struct DiagRequest {
  nlmsghdr header;
  inet_diag_req_v2 body;
};

DiagRequest ExactRequest(const DiagEnd& self, const DiagEnd& peer) {
  DiagRequest req{};
  req.header.nlmsg_len = sizeof req;
  req.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.header.nlmsg_flags = NLM_F_REQUEST;  // no NLM_F_DUMP: the one socket of this 4-tuple
  req.body.sdiag_family = static_cast<__u8>(self.family);
  req.body.sdiag_protocol = IPPROTO_TCP;
  req.body.idiag_states = ~0u;
  req.body.id.idiag_sport = self.port;
  req.body.id.idiag_dport = peer.port;
  std::memcpy(req.body.id.idiag_src, self.addr.data(), sizeof req.body.id.idiag_src);
  std::memcpy(req.body.id.idiag_dst, peer.addr.data(), sizeof req.body.id.idiag_dst);
  req.body.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  req.body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  return req;
}

Error AskFailed(const std::string& what) {
  return Error{"cannot ask the kernel who owns a TCP socket (NETLINK_SOCK_DIAG): " + what,
               "allow netlink sockets of the NETLINK_SOCK_DIAG family (a seccomp profile or "
               "sandbox may block them)"};
}

// The kernel's answer: one inet_diag_msg, or an error (ENOENT: no such socket).
Result<std::optional<uid_t>> ReadAnswer(const std::array<char, 8192>& buffer, ssize_t size) {
  const auto* header = reinterpret_cast<const nlmsghdr*>(buffer.data());
  if (size < static_cast<ssize_t>(sizeof(nlmsghdr)) || !NLMSG_OK(header, size)) {
    return AskFailed("a short answer");
  }
  if (header->nlmsg_type == NLMSG_ERROR) {
    const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(header));
    if (err->error == -ENOENT) return std::optional<uid_t>();
    return AskFailed(std::strerror(-err->error));
  }
  if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
      header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) {
    return AskFailed("an answer of an unexpected type");
  }
  const auto* msg = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
  // A socket no process holds any more has no file (inode 0): one its owner closed (an
  // orphan, or a TIME_WAIT entry, which the kernel reports in its FIN_WAIT2 or TIME_WAIT
  // substate with uid 0), or a request not yet accepted.  uid 0 must not read as root.
  if (msg->idiag_inode == 0 || msg->idiag_state == kTimeWait || msg->idiag_state == kSynRecv ||
      msg->idiag_state == kNewSynRecv) {
    return std::optional<uid_t>(kNoOwner);
  }
  return std::optional<uid_t>(msg->idiag_uid);
}

Result<std::optional<uid_t>> AskKernel(const DiagEnd& self, const DiagEnd& peer) {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (fd.get() < 0) return AskFailed(std::strerror(errno));
  DiagRequest req = ExactRequest(self, peer);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd.get(), &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) != static_cast<ssize_t>(sizeof req)) {
    return AskFailed(std::strerror(errno));
  }
  // The kernel answers inside sendto: the reply is queued already, so never wait for it.
  std::array<char, 8192> buffer{};
  const ssize_t n = ::recv(fd.get(), buffer.data(), buffer.size(), MSG_DONTWAIT);
  if (n < 0) return AskFailed(std::strerror(errno));
  return ReadAnswer(buffer, n);
}

// A loopback address: a socket with one is always in this network namespace.
bool IsLoopback(const DiagEnd& end) {
  if (end.family == AF_INET) return (ntohl(end.addr[0]) >> 24) == 127;
  return end.addr[0] == 0 && end.addr[1] == 0 && end.addr[2] == 0 && ntohl(end.addr[3]) == 1;
}

}  // namespace

Result<std::optional<uid_t>> TcpSocketOwner(const sockaddr_storage& self,
                                            const sockaddr_storage& peer) {
  const DiagEnd s = ToDiagEnd(self);
  const DiagEnd p = ToDiagEnd(peer);
  if (s.family == AF_UNSPEC || s.family != p.family) {
    return Error{
        "cannot look up the owner of a TCP socket: its two ends are not both IPv4 or "
        "both IPv6",
        "this is a bug in gculaunch; please report it"};
  }
  auto owner = AskKernel(s, p);
  // Not found on loopback: it was here, and is gone (reset, or closed and expired).
  if (owner.ok() && !owner->has_value() && IsLoopback(s)) return std::optional<uid_t>(kNoOwner);
  return owner;
}

Result<std::optional<uid_t>> PeerSocketOwner(int fd) {
  sockaddr_storage self{};
  sockaddr_storage peer{};
  socklen_t self_len = sizeof self;
  socklen_t peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return Error{std::string("cannot look up a connection's peer: ") + std::strerror(errno),
                 "the connection closed; try again"};
  }
  // The peer's socket has the peer's address as its own and ours as its peer.
  return TcpSocketOwner(peer, self);
}

bool IsJobUserOrRoot(uid_t uid) { return uid != kNoOwner && (uid == 0 || uid == ::geteuid()); }

bool IsForeignLocalPeer(int fd) {
  auto owner = PeerSocketOwner(fd);
  return owner.ok() && owner->has_value() && !IsJobUserOrRoot(**owner);
}

}  // namespace gculaunch::sys
