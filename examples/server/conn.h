// The socket behind an HTTP request, so the engine can notice a client that went away.
//
// cpp-httplib 0.11 (Debian 12's) gives a handler no handle on its connection: neither the socket
// nor an is_connection_closed(). The connection is identified instead by its two endpoints, which
// httplib does report (remote_addr/remote_port, local_addr/local_port): connection_fd() finds the
// descriptor of this process whose local and peer addresses are exactly those (Linux:
// /proc/self/fd). While the handler (or its content provider) runs, httplib keeps that socket
// open, so the descriptor stays valid and cannot be reused for another connection.
#pragma once

#include <httplib.h>

#include <span>
#include <string>

namespace minfer::server {

/// Binds `http` to host:port (0: any free port) with SO_REUSEADDR only (httplib's default also
/// sets SO_REUSEPORT, which lets a second server silently share the port instead of failing) and
/// a listen backlog of `backlog` (httplib 0.11 listens with 5: a burst of new connections past it
/// waits out a SYN retransmission and, worse, some are reset). Returns the port, or -1.
int bind_server(httplib::Server& http, const std::string& host, int port, int backlog = 1024);

/// One end of a TCP socket as httplib formats it (getnameinfo, numeric host): the peer's
/// (`peer`) or the local one. False when fd is not a connected IPv4/IPv6 socket.
bool socket_endpoint(int fd, bool peer, std::string& host, int& port);

/// The descriptor of req's connection, or -1 when it cannot be found (not Linux). Checks the
/// descriptor this thread found last first (keep-alive connections send many requests).
int connection_fd(const httplib::Request& req);

/// Shuts the reading side (shutdown(SHUT_RD)) of every connection of this process accepted on
/// `local_port`: a thread blocked reading a request (a keep-alive client between requests, a
/// request arriving slowly) sees its end at once, while a response being written still goes
/// out. Returns how many connections it shut.
int shut_reads(int local_port);

/// For each descriptor, whether its peer has closed or reset the connection (POLLRDHUP, POLLHUP,
/// POLLERR), without blocking. Pending input (a pipelined request) does not count as closed.
void peers_closed(std::span<const int> fds, std::span<bool> closed);

}  // namespace minfer::server
