#include "core/plm_file.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "core/geometry.h"
#include "core/settings.h"

namespace petdaq {

// Records are written straight from memory: their in-memory layout is the little-endian wire
// form (proto/records.h).
static_assert(kHostIsLittleEndian, "the .plm writer and reader assume a little-endian host");

namespace {
constexpr std::size_t kFileBufferBytes = 4u << 20;

std::string describe_errno() { return std::strerror(errno); }

// A message's records must be what its header says.
void check_message_bytes(const std::filesystem::path& path, const MessageHeader& header,
                         std::size_t bytes) {
  if (bytes != std::size_t{header.record_count} * header.record_size)
    throw PlmError(path.string() + ": message of " + std::to_string(header.record_count) +
                   " records of " + std::to_string(header.record_size) + " bytes given " +
                   std::to_string(bytes) + " bytes");
}
}  // namespace

PlmHeader make_plm_header(const Settings& settings) {
  const Geometry g = Geometry::from(settings.scanner);
  PlmHeader h;
  h.tick_ps = settings.scanner.tick_ps;
  h.crystal_count = g.crystal_count();
  h.crystals_per_ring = g.crystals_per_ring();
  h.settings_hash = output_settings_hash(settings);
  h.created_unix_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  return h;
}

// ---- PlmWriter ----

PlmWriter::PlmWriter(const std::filesystem::path& file, const PlmHeader& header)
    : path_(file), buffer_(std::make_unique_for_overwrite<char[]>(kFileBufferBytes)) {
  file_ = std::fopen(file.c_str(), "wb");
  if (!file_) throw PlmError(path_.string() + ": cannot create: " + describe_errno());
  std::setvbuf(file_, buffer_.get(), _IOFBF, kFileBufferBytes);
  std::uint8_t bytes[kPlmHeaderBytes];
  encode_plm_header(header, bytes);
  write(bytes, sizeof bytes);
}

PlmWriter::~PlmWriter() {
  if (file_) std::fclose(file_);
}

void PlmWriter::write(const void* data, std::size_t bytes) {
  if (!file_) throw PlmError(path_.string() + ": write after close");
  if (bytes != 0 && std::fwrite(data, 1, bytes, file_) != bytes)
    throw PlmError(path_.string() + ": write failed: " + describe_errno());
  bytes_written_ += bytes;
}

void PlmWriter::write_message(const MessageHeader& header, const void* records,
                              std::size_t bytes) {
  check_message_bytes(path_, header, bytes);
  std::uint8_t h[kMessageHeaderBytes];
  encode_message_header(header, h);
  write(h, sizeof h);
  write(records, bytes);
}

void PlmWriter::flush() {
  if (!file_) throw PlmError(path_.string() + ": write after close");
  if (std::fflush(file_) != 0) throw PlmError(path_.string() + ": write failed: " + describe_errno());
}

void PlmWriter::close() {
  if (!file_) return;
  const bool flushed = std::fflush(file_) == 0;
  const int saved_errno = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) {
    errno = flushed ? errno : saved_errno;
    throw PlmError(path_.string() + ": write failed: " + describe_errno());
  }
}

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

// ---- PlmReader ----

PlmReader::PlmReader(const std::filesystem::path& file) : path_(file) {
  file_ = std::fopen(file.c_str(), "rb");
  if (!file_) throw PlmError(path_.string() + ": cannot open: " + describe_errno());
  // A refused file is closed here: no destructor runs after a throw from a constructor.
  try {
    open_file_header();
  } catch (...) {
    std::fclose(file_);
    file_ = nullptr;
    throw;
  }
}

void PlmReader::open_file_header() {
  std::error_code ec;
  file_bytes_ = std::filesystem::file_size(path_, ec);
  if (ec) file_bytes_ = UINT64_MAX;
  // A buffer no larger than the file (a small file is read at once), not cleared: stdio
  // fills it.
  const std::size_t buffer_bytes = static_cast<std::size_t>(
      std::clamp<std::uint64_t>(file_bytes_, 4096, kFileBufferBytes));
  buffer_ = std::make_unique_for_overwrite<char[]>(buffer_bytes);
  std::setvbuf(file_, buffer_.get(), _IOFBF, buffer_bytes);
  std::uint8_t bytes[kPlmHeaderBytes];
  const std::size_t got = read_some(bytes, sizeof bytes);
  if (got != sizeof bytes)
    throw PlmError(path_.string() + ": truncated file header (" + std::to_string(got) + " of " +
                   std::to_string(kPlmHeaderBytes) + " bytes)");
  header_ = decode_plm_header(bytes);
  if (header_.magic != kPlmMagic)
    throw PlmError(path_.string() + ": not a petdaq list-mode file (magic 0x" +
                   [&] {
                     char hex[9];
                     std::snprintf(hex, sizeof hex, "%08x", header_.magic);
                     return std::string(hex);
                   }() +
                   ", expected 0x4c514450 \"PDQL\")");
  if (header_.version != kPlmVersion)
    throw PlmError(path_.string() + ": list-mode file version " + std::to_string(header_.version) +
                   " is not supported (this build reads version " +
                   std::to_string(kPlmVersion) + ")");
  if (header_.header_size != kPlmHeaderBytes)
    throw PlmError(path_.string() + ": file header size " + std::to_string(header_.header_size) +
                   ", expected " + std::to_string(kPlmHeaderBytes));
}

PlmReader::~PlmReader() {
  if (file_) std::fclose(file_);
}

std::size_t PlmReader::read_some(void* data, std::size_t bytes) {
  const std::size_t got = std::fread(data, 1, bytes, file_);
  if (got != bytes && std::ferror(file_))
    throw PlmError(path_.string() + ": read failed: " + describe_errno());
  offset_ += got;
  return got;
}

bool PlmReader::next(MessageHeader& header, std::vector<CoincRecord>& records) {
  return read_coincidences(header, records, false);
}

bool PlmReader::next_complete(MessageHeader& header, std::vector<CoincRecord>& records) {
  return read_coincidences(header, records, true);
}

bool PlmReader::next_message(MessageHeader& header, std::vector<std::uint8_t>& body,
                             bool tolerate_tail) {
  std::size_t want = 0;
  if (!read_header(header, want, tolerate_tail)) return false;
  body.resize(want);
  return read_body(body.data(), want, tolerate_tail);
}

std::uint64_t PlmReader::skipped_messages() const {
  std::uint64_t n = 0;
  for (const auto& [kind, count] : skipped_) n += count;
  return n;
}

bool PlmReader::read_coincidences(MessageHeader& header, std::vector<CoincRecord>& records,
                                  bool tolerate_tail) {
  for (;;) {
    std::size_t want = 0;
    if (!read_header(header, want, tolerate_tail)) return false;
    if (header.kind == static_cast<std::uint16_t>(MessageKind::prompts) ||
        header.kind == static_cast<std::uint16_t>(MessageKind::delayed)) {
      records.resize(header.record_count);
      return read_body(records.data(), want, tolerate_tail);
    }
    if (header.kind == static_cast<std::uint16_t>(MessageKind::deadtime)) {
      // Returned with no records, its intervals in dead_intervals() (DESIGN section 6).
      records.clear();
      dead_.resize(header.record_count);
      return read_body(dead_.data(), want, tolerate_tail);
    }
    // Another kind (singles, or one this build does not know): skipped and counted.
    std::uint8_t scratch[1 << 14];
    for (std::size_t left = want; left > 0;) {
      const std::size_t n = std::min(left, sizeof scratch);
      if (!read_body(scratch, n, tolerate_tail)) return false;
      left -= n;
    }
    ++skipped_[header.kind];
  }
}

std::size_t plm_record_size(std::uint16_t kind) {
  switch (static_cast<MessageKind>(kind)) {
    case MessageKind::prompts:
    case MessageKind::delayed:
      return sizeof(CoincRecord);
    case MessageKind::singles:
      return sizeof(Single);
    case MessageKind::deadtime:
      return sizeof(DeadInterval);
    default:
      return 0;
  }
}

bool PlmReader::read_header(MessageHeader& header, std::size_t& want, bool tolerate_tail) {
  const std::uint64_t at = offset_;
  std::uint8_t bytes[kMessageHeaderBytes];
  const std::size_t got = read_some(bytes, sizeof bytes);
  if (got == 0) return false;
  partial_tail_offset_ = at;
  message_bytes_ = got;
  const std::string where = path_.string() + ": message at byte " + std::to_string(at);
  if (got != sizeof bytes) {
    if (tolerate_tail) {
      partial_tail_bytes_ = got;
      return false;
    }
    throw PlmError(where + ": truncated header (" + std::to_string(got) + " of " +
                   std::to_string(kMessageHeaderBytes) + " bytes)");
  }
  header = decode_message_header(bytes);
  if (header.magic != kMessageMagic) throw PlmError(where + ": bad message magic");
  if (!message_version_supported(header.version))
    throw PlmError(where + ": message version " + std::to_string(header.version) +
                   " is not supported");
  const std::size_t record_size = plm_record_size(header.kind);
  if (record_size != 0 && header.record_size != record_size)
    throw PlmError(where + ": record size " + std::to_string(header.record_size) + " for kind " +
                   std::to_string(header.kind) + ", expected " + std::to_string(record_size));
  want = std::size_t{header.record_count} * header.record_size;
  if (tolerate_tail && want > file_bytes_ - std::min(file_bytes_, offset_)) {
    // A file being written has grown since it was opened.
    std::error_code ec;
    const std::uint64_t now = std::filesystem::file_size(path_, ec);
    if (!ec) file_bytes_ = std::max(file_bytes_, now);
  }
  // A corrupt count must not make us allocate more than the file can hold.
  const std::uint64_t left = file_bytes_ - std::min(file_bytes_, offset_);
  if (want > left) {
    if (tolerate_tail) {
      partial_tail_bytes_ = kMessageHeaderBytes + left;
      return false;
    }
    throw PlmError(where + ": truncated records (" + std::to_string(left) + " of " +
                   std::to_string(want) + " bytes)");
  }
  return true;
}

bool PlmReader::read_body(void* data, std::size_t bytes, bool tolerate_tail) {
  const std::size_t got = read_some(data, bytes);
  message_bytes_ += got;
  if (got == bytes) return true;
  if (tolerate_tail) {
    partial_tail_bytes_ = message_bytes_;
    return false;
  }
  throw PlmError(path_.string() + ": message at byte " + std::to_string(partial_tail_offset_) +
                 ": truncated records (" + std::to_string(message_bytes_ - kMessageHeaderBytes) +
                 " bytes)");
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
