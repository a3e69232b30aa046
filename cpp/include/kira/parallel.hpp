// A small parallel-for: splits [0, n) into chunks handed out dynamically to `threads`
// std::threads (the caller's thread is one of them). An exception thrown by any worker
// stops the hand-out and is rethrown on the caller's thread after every worker joined.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kira {

// 0 means "all cores".
// (hardware_concurrency reads /sys on every call: ask once.)
inline std::size_t resolve_threads(std::size_t threads) {
  static const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return threads == 0 ? cores : threads;
}

// Calls fn(begin, end, worker) for disjoint chunks covering [0, n); worker < threads.
template <class Fn>
void parallel_for(std::size_t n, std::size_t threads, std::size_t chunk, Fn&& fn) {
  if (n == 0) return;
  chunk = std::max<std::size_t>(chunk, 1);
  threads = std::min(resolve_threads(threads), (n + chunk - 1) / chunk);
  if (threads <= 1) {
    fn(std::size_t{0}, n, std::size_t{0});
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&](std::size_t worker) {
    try {
      while (!failed.load(std::memory_order_relaxed)) {
        const std::size_t begin = next.fetch_add(chunk);
        if (begin >= n) break;
        fn(begin, std::min(n, begin + chunk), worker);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace kira
