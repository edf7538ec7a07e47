#include "http.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "conn.h"

namespace minfer::server {
namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_close_after_response = false;

int to_ms(time_t sec, time_t usec) {
  const long long ms = static_cast<long long>(sec) * 1000 + usec / 1000;
  return static_cast<int>(std::clamp<long long>(ms, 0, INT_MAX));
}

// Waits up to `ms` for `events` on fd (retrying after signals). A hang-up or an error counts as
// ready: the read or write that follows reports it.
bool wait_for(int fd, short events, int ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    pollfd p{fd, events, 0};
    const int left = static_cast<int>(std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    const int rc = ::poll(&p, 1, left);
    if (rc > 0) return true;
    if (rc == 0 || errno != EINTR) return false;
  }
}

ssize_t recv_some(int fd, void* p, size_t n) {
  ssize_t r;
  do r = ::recv(fd, p, n, 0);
  while (r < 0 && errno == EINTR);
  return r;
}

// The stream of one connection, for all its requests: what a read takes from the socket past the
// current request stays in the buffer for the next. Reads and writes behave as httplib's
// SocketStream (a read waits up to the read timeout, a write up to the write timeout and fails
// once the peer has closed).
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(int fd, int read_ms, int write_ms) : fd_(fd), read_ms_(read_ms), write_ms_(write_ms) {}

  bool is_readable() const override { return pos_ < end_ || wait_for(fd_, POLLIN, read_ms_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_ms_) && peer_open(); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ < end_) {
      const size_t n = std::min(size, end_ - pos_);
      std::memcpy(ptr, buf_.data() + pos_, n);
      pos_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!is_readable()) return -1;
    if (size >= buf_.size()) return recv_some(fd_, ptr, size);  // a body in large pieces: no copy
    const ssize_t got = recv_some(fd_, buf_.data(), buf_.size());
    if (got <= 0) return got;
    const size_t n = std::min(size, static_cast<size_t>(got));
    std::memcpy(ptr, buf_.data(), n);
    pos_ = n;
    end_ = static_cast<size_t>(got);
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t r;
    do r = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { socket_endpoint(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { socket_endpoint(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

  /// Whether the next request has begun to arrive within `ms` (bytes buffered or on the socket;
  /// the client closing counts: the request parser then sees the end).
  bool next_request(int ms) const { return pos_ < end_ || wait_for(fd_, POLLIN, ms); }
  /// Input not read yet, now: buffered, on the socket, or the client's close.
  bool unread_input() const { return pos_ < end_ || wait_for(fd_, POLLIN, 0); }

 private:
  // httplib's is_socket_alive: no input, or input that is not the end of the stream.
  bool peer_open() const {
    if (!wait_for(fd_, POLLIN, 0)) return true;
    char c;
    ssize_t r;
    do r = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    return r > 0 || (r < 0 && errno == EAGAIN);
  }

  int fd_;
  int read_ms_, write_ms_;
  std::array<char, 4096> buf_{};
  size_t pos_ = 0, end_ = 0;
};

// Closing a socket with unread input makes the kernel reset the connection instead of ending it,
// and a reset can destroy the last response before the client reads it. When input is left (a
// request past the keep-alive limit, the body of a request refused with "Connection: close"),
// the sending side ends first and the input is read and dropped until the client closes, for at
// most a second (Apache's lingering close).
void linger_and_close(int fd, const ConnStream& strm) {
  if (strm.unread_input()) {
    ::shutdown(fd, SHUT_WR);
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    std::array<char, 16384> sink;
    for (auto now = Clock::now(); now < deadline; now = Clock::now()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
      if (!wait_for(fd, POLLIN, static_cast<int>(left)) || recv_some(fd, sink.data(), sink.size()) <= 0) break;
    }
  }
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

}  // namespace

void HttpServer::close_after_response() { t_close_after_response = true; }

bool HttpServer::process_and_close_socket(socket_t sock) {
  ConnStream strm(sock, to_ms(read_timeout_sec_, read_timeout_usec_), to_ms(write_timeout_sec_, write_timeout_usec_));
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!strm.next_request(to_ms(keep_alive_timeout_sec_, 0))) break;
    bool closed = false;  // the request asked to close (Connection: close, HTTP/1.0)
    t_close_after_response = false;
    ok = process_request(strm, /*close_connection=*/left == 1, closed, {});
    if (!ok || closed || t_close_after_response) break;
  }
  linger_and_close(sock, strm);
  return ok;
}

}  // namespace minfer::server
