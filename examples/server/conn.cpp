#include "conn.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace minfer::server {

bool socket_endpoint(int fd, bool peer, std::string& host, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0 || (addr.ss_family != AF_INET && addr.ss_family != AF_INET6)) return false;
  char buf[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) return false;
  host = buf;
  port = addr.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                                   : ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return true;
}

namespace {

bool matches(int fd, const httplib::Request& req) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  std::string host;
  int port = 0;
  if (!socket_endpoint(fd, false, host, port) || port != req.local_port || host != req.local_addr) return false;
  return socket_endpoint(fd, true, host, port) && port == req.remote_port && host == req.remote_addr;
}

}  // namespace

int bind_server(httplib::Server& http, const std::string& host, int port, int backlog) {
  auto listener = std::make_shared<int>(-1);
  http.set_socket_options([listener](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const char*>(&yes), sizeof(yes));
    *listener = sock;
  });
  if (port == 0) port = http.bind_to_any_port(host);
  else if (!http.bind_to_port(host, port)) port = -1;
  if (port > 0 && *listener >= 0) ::listen(*listener, backlog);  // a listening socket takes a new backlog
  return port;
}

int connection_fd(const httplib::Request& req) {
  thread_local int last = -1;
  if (req.remote_port < 0 || req.local_port < 0) return -1;
  if (last >= 0 && matches(last, req)) return last;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == dirfd(dir)) continue;
    if (matches(fd, req)) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return last = found;
}

int shut_reads(int local_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    struct stat st {};
    if (fd == dirfd(dir) || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    std::string host;
    int port = 0;
    if (!socket_endpoint(fd, false, host, port) || port != local_port) continue;
    if (!socket_endpoint(fd, true, host, port)) continue;  // the listening socket has no peer
    if (::shutdown(fd, SHUT_RD) == 0) ++n;
  }
  closedir(dir);
  return n;
}

void peers_closed(std::span<const int> fds, std::span<bool> closed) {
  std::vector<pollfd> p;
  p.reserve(fds.size());
  for (int fd : fds) p.push_back({fd, static_cast<short>(POLLRDHUP), 0});
  for (bool& c : closed) c = false;
  if (p.empty() || poll(p.data(), p.size(), 0) <= 0) return;
  for (size_t i = 0; i < p.size(); ++i)
    closed[i] = fds[i] >= 0 && (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace minfer::server
