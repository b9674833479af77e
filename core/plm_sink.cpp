#include "core/plm_sink.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "core/settings.h"

namespace petdaq {

namespace {
std::string describe_errno() { return std::strerror(errno); }
}  // namespace

// ---- PlmThreadWriter ----

namespace {
// A writer thread takes the waiting items up to these (one pwritev), so that the others get
// the rest.
constexpr std::size_t kBatchItems = 32;
constexpr std::size_t kBatchBytes = 4u << 20;

class PlainAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = std::malloc(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(void* p, std::size_t) noexcept override { std::free(p); }
  const char* kind() const override { return "plain"; }
};

std::unique_ptr<HostAllocator> or_plain(std::unique_ptr<HostAllocator> a) {
  return a ? std::move(a) : std::make_unique<PlainAllocator>();
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

PlmThreadWriter::PlmThreadWriter(const std::filesystem::path& file, const PlmHeader& header,
                                 PlmWriterOptions options)
    : path_(file),
      allocator_(or_plain(std::move(options.allocator))),
      arena_(std::max<std::size_t>(options.memory_bytes, 4096), *allocator_),
      items_(kMaxItems),
      done_(kMaxItems, 0) {
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) throw PlmError(path_.string() + ": cannot create: " + describe_errno());
  // A pipe has no places: one thread writes it in order.
  seekable_ = ::lseek(fd_, 0, SEEK_CUR) >= 0;
  std::uint8_t bytes[kPlmHeaderBytes];
  encode_plm_header(header, bytes);
  try {
    write_here(bytes, sizeof bytes, nullptr, 0);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  const unsigned n = seekable_ ? std::clamp(options.threads, 1u, 64u) : 1u;
  for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
}

PlmThreadWriter::~PlmThreadWriter() {
  if (!closed_) {
    {
      // What was given still goes to the file, as PlmWriter's destructor flushes its buffer.
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : threads_) t.join();
    ::close(fd_);
  }
}

// All of `parts` at `offset` (or, in a file that cannot seek, next), partial writes resumed.
void PlmThreadWriter::write_at(std::uint64_t offset, const iovec* parts, int count) {
  struct iovec left[2 * kBatchItems];
  std::copy(parts, parts + count, left);
  int first = 0;
  while (first < count) {
    const ssize_t n = seekable_ ? ::pwritev(fd_, left + first, count - first, static_cast<off_t>(offset))
                                : ::writev(fd_, left + first, count - first);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw PlmError(path_.string() + ": write failed: " + describe_errno());
    }
    if (n == 0) throw PlmError(path_.string() + ": write failed: no bytes written");
    offset += static_cast<std::uint64_t>(n);
    auto done = static_cast<std::size_t>(n);
    while (first < count && done >= left[first].iov_len) done -= left[first++].iov_len;
    if (first < count) {
      left[first].iov_base = static_cast<std::uint8_t*>(left[first].iov_base) + done;
      left[first].iov_len -= done;
    }
  }
}

// On the caller's thread, at the end of what was given (the file header; a message when no
// thread can make room).
void PlmThreadWriter::write_here(const std::uint8_t* header, std::size_t header_bytes,
                                 const void* data, std::size_t bytes) {
  struct iovec parts[2];
  int count = 0;
  if (header_bytes > 0) parts[count++] = {const_cast<std::uint8_t*>(header), header_bytes};
  if (bytes > 0) parts[count++] = {const_cast<void*>(data), bytes};
  write_at(bytes_given_, parts, count);
  bytes_given_ += header_bytes + bytes;
}

void PlmThreadWriter::run() {
  Item batch[kBatchItems];
  struct iovec parts[2 * kBatchItems];
  for (;;) {
    std::uint64_t first = 0;
    std::size_t n = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return picked_ < queued_ || stop_ || error_; });
      if (error_ || picked_ == queued_) return;  // failed, or stopping with nothing left
      first = picked_;
      std::size_t bytes = 0;
      while (picked_ < queued_ && n < kBatchItems && (n == 0 || bytes < kBatchBytes)) {
        const Item& item = items_[picked_ % kMaxItems];
        bytes += item.header_bytes + item.bytes;
        batch[n++] = item;
        ++picked_;
      }
    }
    // Items are queued in file order: a batch is one run of bytes.
    int count = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (batch[i].header_bytes > 0) parts[count++] = {batch[i].header, batch[i].header_bytes};
      if (batch[i].bytes > 0) parts[count++] = {const_cast<void*>(batch[i].data), batch[i].bytes};
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      write_at(batch[0].offset, parts, count);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    const double took = seconds_since(start);
    for (std::size_t i = 0; i < n; ++i)
      if (batch[i].hint) MessageArena::let_go_message(nullptr, batch[i].hint);
    {
      std::lock_guard lock(mutex_);
      stats_.write_s += took;
      for (std::size_t i = 0; i < n; ++i) done_[(first + i) % kMaxItems] = 1;
      while (completed_ < picked_ && done_[completed_ % kMaxItems]) done_[completed_++ % kMaxItems] = 0;
    }
    changed_.notify_all();
  }
}

void PlmThreadWriter::rethrow_locked() {
  if (error_) std::rethrow_exception(error_);
}

void* PlmThreadWriter::lend(std::size_t bytes) { return arena_.lend(bytes); }

void PlmThreadWriter::let_go_lent(const SliceResult& result) { arena_.let_go_lent(result); }

// Where `bytes` of `data` are held for a thread (the data itself where the arena holds it,
// else a copy), waiting for the threads to make room; null when only this thread holds the
// arena (a slice's lent pieces not yet let go of) and no room comes.
void* PlmThreadWriter::room_for(const void* data, std::size_t bytes, void*& hint) {
  for (;;) {
    std::uint64_t seen = 0;
    {
      std::lock_guard lock(mutex_);
      rethrow_locked();
      seen = completed_;
    }
    if (void* p = arena_.hold_or_copy(data, bytes, hint)) return p;
    std::unique_lock lock(mutex_);
    if (completed_ == queued_ && seen == completed_) return nullptr;
    const auto start = std::chrono::steady_clock::now();
    changed_.wait(lock, [&] { return completed_ != seen || error_; });
    stats_.caller_wait_s += seconds_since(start);
  }
}

// One item at the end of what was given, waiting for a free place in the queue.
void PlmThreadWriter::queue(const std::uint8_t* header, std::size_t header_bytes,
                            const void* data, std::size_t bytes, void* hint) {
  std::unique_lock lock(mutex_);
  if (queued_ - completed_ == kMaxItems) {
    const auto start = std::chrono::steady_clock::now();
    changed_.wait(lock, [&] { return queued_ - completed_ < kMaxItems || error_; });
    stats_.caller_wait_s += seconds_since(start);
  }
  if (error_) {
    if (hint) MessageArena::let_go_message(nullptr, hint);
    rethrow_locked();
  }
  Item& item = items_[queued_ % kMaxItems];
  item.offset = bytes_given_;
  item.header_bytes = header_bytes;
  if (header_bytes > 0) std::memcpy(item.header, header, header_bytes);
  item.data = data;
  item.bytes = bytes;
  item.hint = hint;
  ++queued_;
  bytes_given_ += header_bytes + bytes;
  lock.unlock();
  changed_.notify_one();
}

void PlmThreadWriter::write_message(const MessageHeader& header, const void* records,
                                    std::size_t bytes) {
  if (closed_) throw PlmError(path().string() + ": write after close");
  check_message_bytes(path(), header, bytes);
  std::uint8_t h[kMessageHeaderBytes];
  encode_message_header(header, h);
  {
    std::lock_guard lock(mutex_);
    rethrow_locked();
    ++stats_.messages;
    if (bytes > 0 && arena_.owns(records)) ++stats_.messages_in_place;
  }
  if (bytes == 0) return queue(h, sizeof h, nullptr, 0, nullptr);
  // Records the arena does not hold are copied in, in parts of at most a quarter of it.
  const std::size_t part = arena_.owns(records) ? bytes : std::max<std::size_t>(arena_.capacity() / 4, 1);
  const auto* from = static_cast<const std::uint8_t*>(records);
  for (std::size_t at = 0; at < bytes; at += part) {
    const std::size_t k = std::min(part, bytes - at);
    void* hint = nullptr;
    void* held = room_for(from + at, k, hint);
    const std::uint8_t* head = at == 0 ? h : nullptr;
    const std::size_t head_bytes = at == 0 ? sizeof h : 0;
    if (!held) {
      // No thread can make room: everything given is written; this part is written here.
      write_here(head, head_bytes, from + at, k);
      std::lock_guard lock(mutex_);
      ++stats_.parts_by_caller;
      continue;
    }
    if (held != from + at) {
      std::lock_guard lock(mutex_);
      stats_.bytes_copied += k;
    }
    queue(head, head_bytes, held, k, hint);
  }
}

void PlmThreadWriter::wait_idle(std::unique_lock<std::mutex>& lock) {
  const auto start = std::chrono::steady_clock::now();
  changed_.wait(lock, [&] { return completed_ == queued_ || error_; });
  stats_.caller_wait_s += seconds_since(start);
  rethrow_locked();
}

void PlmThreadWriter::flush() {
  if (closed_) throw PlmError(path().string() + ": write after close");
  std::unique_lock lock(mutex_);
  wait_idle(lock);
}

void PlmThreadWriter::close() {
  if (closed_) return;
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    try {
      wait_idle(lock);
    } catch (...) {
      error = std::current_exception();
    }
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
  closed_ = true;
  const bool was_closed = ::close(fd_) == 0;
  if (error) std::rethrow_exception(error);
  if (!was_closed) throw PlmError(path_.string() + ": write failed: " + describe_errno());
}

PlmThreadWriter::Stats PlmThreadWriter::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

// ---- PlmSink ----

PlmSink::PlmSink(const Settings& settings, const std::filesystem::path& file,
                 PlmWriterOptions options)
    : writer_(file, make_plm_header(settings), std::move(options)),
      delayed_(publishes_delayed(settings)) {}

void PlmSink::on_slice(std::uint64_t run_id, const SliceResult& result) {
  const MessageHeader prompts = builder_.build(MessageKind::prompts, run_id, result);
  writer_.write_message(prompts, result.prompts, result.prompt_count * sizeof(CoincRecord));
  ++messages_;
  if (delayed_) {
    const MessageHeader delayed = builder_.build(MessageKind::delayed, run_id, result);
    writer_.write_message(delayed, result.delayed, result.delayed_count * sizeof(CoincRecord));
    ++messages_;
  }
  writer_.let_go_lent(result);
}

}  // namespace petdaq
