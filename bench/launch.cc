#include "launch.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cclab/collectives/cluster_env.h"
#include "cclab/collectives/error.h"

namespace cclab::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct LaunchFlags {
  int ranks = 2;
  std::string rendezvous;
  int grace_ms = 5000;
  std::vector<std::string> command;
};

// One child: its pid, its two output pipes and the unfinished line of each.
struct Rank {
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr
  std::string partial[2];
  bool running = true;
};

volatile sig_atomic_t g_signal = 0;  // SIGINT/SIGTERM received by launch itself

// Writes every complete line of `data` with the rank's prefix to fd 1 or 2.
void emit(int rank, int stream, std::string& partial, std::string_view data, bool flush) {
  partial.append(data);
  std::size_t start = 0, nl;
  std::string out;
  while ((nl = partial.find('\n', start)) != std::string::npos) {
    out += fmt::format("[{}] {}\n", rank, std::string_view(partial).substr(start, nl - start));
    start = nl + 1;
  }
  partial.erase(0, start);
  if (flush && !partial.empty()) out += fmt::format("[{}] {}\n", rank, std::exchange(partial, ""));
  for (std::size_t done = 0; done < out.size();) {
    const ssize_t n = write(stream == 0 ? 1 : 2, out.data() + done, out.size() - done);
    if (n <= 0) break;  // our own output is gone; nothing better to do
    done += static_cast<std::size_t>(n);
  }
}

// Starts one rank; -1 with `why` set when the system refuses (no pipe, no fork).
pid_t spawn(const LaunchFlags& f, int rank, const std::string& rendezvous,
            const std::string& run_id, int (&fds)[2], std::string& why) {
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    why = fmt::format("pipe: {}", strerror(errno));
    for (int fd : {out[0], out[1], err[0], err[1]})
      if (fd >= 0) close(fd);
    return -1;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    why = fmt::format("fork: {}", strerror(errno));
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return -1;
  }
  if (pid == 0) {
    setpgid(0, 0);  // its own group, so stopping it stops what it started too
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (const char* v : {"TF_CONFIG", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}) unsetenv(v);
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(f.ranks).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    setenv("LOCAL_WORLD_SIZE", std::to_string(f.ranks).c_str(), 1);
    setenv("CCLAB_RENDEZVOUS", rendezvous.c_str(), 1);
    setenv("CCLAB_RUN_ID", run_id.c_str(), 1);
    setenv("CCLAB_BIND", "127.0.0.1", 0);  // one machine: loopback unless told otherwise
    std::vector<char*> argv;
    for (const auto& a : f.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    dprintf(2, "cclab launch: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  fds[0] = out[0];
  fds[1] = err[0];
  return pid;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                       sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

class Launcher {
 public:
  explicit Launcher(const LaunchFlags& f) : flags_(f), ranks_(f.ranks) {}

  int run() {
    const std::string run_id =
        fmt::format("{}-{}", getpid(), Clock::now().time_since_epoch().count());
    std::string rendezvous = flags_.rendezvous;
    if (rendezvous.empty()) {  // a fresh file store, removed afterwards
      char dir[] = "/tmp/cclab-rdzv-XXXXXX";
      if (mkdtemp(dir) == nullptr)
        throw IoError(fmt::format("cclab launch: mkdtemp: {}", strerror(errno)));
      temp_dir_ = dir;
      rendezvous = "file:" + temp_dir_;
    }
    coll::parse_rendezvous(rendezvous, "--rendezvous");
    start_all(rendezvous, run_id);
    while (running() > 0) {
      pump(100);
      reap();
      escalate();
    }
    for (int r = 0; r < flags_.ranks; ++r) drain(r);
    if (!temp_dir_.empty()) std::filesystem::remove_all(temp_dir_);
    return first_failure_ < 0 ? 0 : std::max(1, exit_code(failure_status_));
  }

 private:
  // Starts the ranks in order; when the system refuses one, the ranks already
  // started are stopped at once (no grace: they would wait for the missing one).
  void start_all(const std::string& rendezvous, const std::string& run_id) {
    for (int r = 0; r < flags_.ranks; ++r) {
      std::string why;
      ranks_[r].pid = spawn(flags_, r, rendezvous, run_id, ranks_[r].fds, why);
      if (ranks_[r].pid > 0) continue;
      for (int q = r; q < flags_.ranks; ++q) ranks_[q].running = false;
      say(fmt::format("cannot start rank {} of {}: {}; stopping the {} started", r, flags_.ranks,
                      why, r));
      first_failure_ = r;
      failure_status_ = 1 << 8;  // as if it had exited with status 1
      stop_at_ = Clock::now();
      return;
    }
  }

  int running() const {
    int n = 0;
    for (const auto& r : ranks_) n += r.running;
    return n;
  }

  // Forwards output for up to `timeout_ms`.
  void pump(int timeout_ms) {
    std::vector<pollfd> pfds;
    for (const auto& r : ranks_)
      for (int fd : r.fds)
        if (fd >= 0) pfds.push_back({fd, POLLIN, 0});
    if (pfds.empty()) {
      usleep(timeout_ms * 1000);
      return;
    }
    if (poll(pfds.data(), pfds.size(), timeout_ms) <= 0) return;
    for (const auto& p : pfds)
      if (p.revents) read_from(p.fd);
  }

  void read_from(int fd) {
    for (int r = 0; r < flags_.ranks; ++r)
      for (int s = 0; s < 2; ++s)
        if (ranks_[r].fds[s] == fd) {
          char buf[65536];
          const ssize_t n = read(fd, buf, sizeof buf);
          if (n > 0) return emit(r, s, ranks_[r].partial[s], {buf, std::size_t(n)}, false);
          close(fd);  // EOF or error: the stream is over
          ranks_[r].fds[s] = -1;
          return emit(r, s, ranks_[r].partial[s], {}, true);
        }
  }

  // Reads whatever is left once the rank has exited (bounded: pipes are finite).
  void drain(int r) {
    for (int s = 0; s < 2; ++s)
      while (ranks_[r].fds[s] >= 0) read_from(ranks_[r].fds[s]);
  }

  void reap() {
    // Collect every rank that has exited by now, then blame one: a rank killed
    // by a signal is the cause of the others' errors (they lost a peer), so it
    // wins over ranks that merely exited with an error after it.
    int blamed = -1, blamed_status = 0;
    for (int r = 0; r < flags_.ranks; ++r) {
      int status = 0;
      if (!ranks_[r].running || waitpid(ranks_[r].pid, &status, WNOHANG) != ranks_[r].pid) continue;
      ranks_[r].running = false;
      drain(r);
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (!failed) continue;
      const bool better = blamed < 0 || (WIFSIGNALED(status) && !WIFSIGNALED(blamed_status));
      if (better) blamed = r, blamed_status = status;
    }
    if (blamed < 0 || first_failure_ >= 0 || stopping_) return;
    first_failure_ = blamed;
    failure_status_ = blamed_status;
    stop_at_ = Clock::now() + std::chrono::milliseconds(flags_.grace_ms);
    say(fmt::format("rank {} (pid {}) {}; stopping the other ranks", blamed, ranks_[blamed].pid,
                    describe_status(blamed_status)));
  }

  // After a failure (or our own SIGINT/SIGTERM): grace, SIGTERM, then SIGKILL.
  void escalate() {
    if (g_signal && !stopping_) {
      say(fmt::format("received signal {}; stopping the ranks", int(g_signal)));
      stop_at_ = Clock::now();
      if (first_failure_ < 0) failure_status_ = g_signal;  // as if killed by it
      if (first_failure_ < 0) first_failure_ = flags_.ranks;
    }
    if (first_failure_ < 0 || Clock::now() < stop_at_) return;
    const int sig = stopping_ ? SIGKILL : SIGTERM;
    if (stopping_ && Clock::now() < stop_at_) return;
    for (const auto& r : ranks_)
      if (r.running) kill(-r.pid, sig);
    stop_at_ = Clock::now() + std::chrono::seconds(2);
    stopping_ = true;
  }

  void say(const std::string& line) {
    const auto s = fmt::format("cclab launch: {}\n", line);
    if (write(2, s.data(), s.size()) < 0) return;
  }

  const LaunchFlags& flags_;
  std::vector<Rank> ranks_;
  std::string temp_dir_;
  int first_failure_ = -1;
  int failure_status_ = 0;
  bool stopping_ = false;
  Clock::time_point stop_at_;
};

// Each rank holds two pipes open in launch: raises the soft limit on open
// files to the hard one where that is short, and refuses before starting
// anything where even the hard one is.
void ensure_open_files(int ranks) {
  const rlim_t need = 2 * static_cast<rlim_t>(ranks) + 32;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= need)
    return;
  if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= need) {
    lim.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) return;
  }
  throw InvalidArgument(fmt::format(
      "-n/--nproc: {} ranks need {} open files in launch (two pipes each) but the limit is {} "
      "(ulimit -n)",
      ranks, need, static_cast<unsigned long long>(lim.rlim_max)));
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "launch", "Run N local ranks of a command (e.g. cclab bench --backend gloo) as children");
  auto flags = std::make_shared<LaunchFlags>();
  cmd->add_option("-n,--nproc", flags->ranks, "Number of ranks")->capture_default_str();
  cmd->add_option("--rendezvous", flags->rendezvous,
                  "file:DIR or redis://host:port (default: a fresh temporary file store)");
  cmd->add_option("--grace-ms", flags->grace_ms,
                  "After a rank fails, how long the others may take to fail on their own")
      ->capture_default_str();
  cmd->add_option("command", flags->command, "The command each rank runs (after --)");
  cmd->callback([flags] {
    // CLI11's own words for a missing positional ("command is required") say
    // neither where it goes nor what it looks like.
    if (flags->command.empty())
      throw InvalidArgument(
          "command: none given (allowed: the command each rank runs, after --, e.g. cclab launch "
          "-n 2 -- cclab bench --backend gloo)");
    if (flags->ranks < 1)
      throw InvalidArgument(fmt::format("-n/--nproc: must be at least 1 (got {})", flags->ranks));
    if (flags->grace_ms < 0)
      throw InvalidArgument(fmt::format("--grace-ms: must be >= 0 (got {})", flags->grace_ms));
    ensure_open_files(flags->ranks);
    struct sigaction sa = {};
    sa.sa_handler = [](int sig) { g_signal = sig; };
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    const int status = Launcher(*flags).run();
    if (status != 0) throw CLI::RuntimeError(status);
  });
}

}  // namespace cclab::bench
