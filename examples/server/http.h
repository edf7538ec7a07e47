// The HTTP server under minfer-server: cpp-httplib's Server with its connection loop replaced, so
// that requests pipelined on a keep-alive connection are all answered, in order.
//
// httplib 0.11 (Debian 12's) serves a connection in Server::process_and_close_socket: a loop that
// builds a new detail::SocketStream for every request. That stream reads the socket 4 KiB at a
// time (the request line and headers are read a byte at a time through it), so when a client
// writes a second request before the first is answered (HTTP/1.1 pipelining), the bytes of the
// second are already in the first request's stream buffer when that stream is destroyed: they
// are lost. The loop then waits on the socket for the next request, which never comes, and
// closes the connection after the keep-alive timeout (5 s) without a word.
//
// HttpServer overrides that loop (a virtual of httplib::Server; process_request, which parses
// and answers one request, is protected) with one buffered stream for the whole connection:
// bytes read ahead stay in its buffer for the next request. The rest is httplib's: the keep-alive
// limits (keep_alive_max_count, keep_alive_timeout), the read and write timeouts, a request's
// "Connection: close" and HTTP/1.0 without keep-alive end the connection.
#pragma once

#include <httplib.h>

namespace minfer::server {

class HttpServer : public httplib::Server {
 public:
  /// Ends the connection of the request the calling thread is serving once its response is
  /// written (the response should say "Connection: close"). For handlers and the pre- and
  /// post-routing handlers, which run on the connection's thread. httplib 0.11 itself keeps a
  /// connection open whatever a handler's response says.
  static void close_after_response();

 private:
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace minfer::server
