// Does MSG_ZEROCOPY save the sender's copy on this path? Built and run by
// zerocopy_probe.sh over loopback and over a veth pair between two network
// namespaces (the paths every benchmark of this project uses).
//
//   zerocopy_probe recv PORT                     # sink: reads and discards
//   zerocopy_probe send HOST PORT BYTES CHUNK {copy|zerocopy}
//
// The sender writes BYTES in CHUNK-sized send() calls from one buffer and
// prints wall GB/s, its own CPU seconds per GB (user + sys of the process),
// and for zerocopy the completion notifications, split into those where the
// kernel really avoided the copy and those flagged SO_EE_CODE_ZEROCOPY_COPIED
// (it copied after all, e.g. for a receiver on the same host).
#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

namespace {

[[noreturn]] void Die(const char* what) {
  perror(what);
  exit(1);
}

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

int Receive(int port) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) Die("bind");
  if (listen(lfd, 4) != 0) Die("listen");
  std::vector<char> buf(4 << 20);
  for (;;) {  // one connection after another, until killed
    int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) Die("accept");
    while (recv(fd, buf.data(), buf.size(), 0) > 0) {
    }
    close(fd);
  }
}

struct Notifications {
  long zerocopied = 0, copied = 0;
};

// Drains the error queue: each message acknowledges a range of sends.
void DrainCompletions(int fd, Notifications* n, bool wait) {
  for (;;) {
    char control[128];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    if (recvmsg(fd, &msg, MSG_ERRQUEUE | (wait ? 0 : MSG_DONTWAIT)) < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Die("recvmsg(MSG_ERRQUEUE)");
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      auto* ee = reinterpret_cast<sock_extended_err*>(CMSG_DATA(c));
      if (ee->ee_origin != SO_EE_ORIGIN_ZEROCOPY) continue;
      const long sends = static_cast<long>(ee->ee_data) - static_cast<long>(ee->ee_info) + 1;
      ((ee->ee_code & SO_EE_CODE_ZEROCOPY_COPIED) ? n->copied : n->zerocopied) += sends;
    }
    wait = false;
  }
}

int Send(const char* host, int port, size_t total, size_t chunk, bool zerocopy) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  if (zerocopy && setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0) Die("SO_ZEROCOPY");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) Die("address");
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) Die("connect");
  std::vector<char> buf(chunk, 1);
  Notifications n;
  long sends = 0;
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t sent = 0; sent < total;) {
    const ssize_t k = send(fd, buf.data(), std::min(chunk, total - sent), zerocopy ? MSG_ZEROCOPY : 0);
    if (k < 0) {
      if (errno == ENOBUFS && zerocopy) {  // too many pinned sends outstanding: reap some
        DrainCompletions(fd, &n, true);
        continue;
      }
      Die("send");
    }
    sent += static_cast<size_t>(k);
    ++sends;
    if (zerocopy) DrainCompletions(fd, &n, false);
  }
  while (zerocopy && n.zerocopied + n.copied < sends) DrainCompletions(fd, &n, true);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  printf("%-8s chunk %7zu KB: %6.2f GB/s, sender %.3f CPU s/GB", zerocopy ? "zerocopy" : "copy", chunk >> 10,
         total / wall / 1e9, cpu / (total / 1e9));
  if (zerocopy) printf(", sends completed zero-copy %ld, copied by the kernel %ld", n.zerocopied, n.copied);
  printf("\n");
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "recv") return Receive(atoi(argv[2]));
  if (argc == 7 && std::string(argv[1]) == "send") {
    return Send(argv[2], atoi(argv[3]), strtoull(argv[4], nullptr, 10), strtoull(argv[5], nullptr, 10),
                std::string(argv[6]) == "zerocopy");
  }
  fprintf(stderr, "usage: %s recv PORT | send HOST PORT BYTES CHUNK {copy|zerocopy}\n", argv[0]);
  return 2;
}
