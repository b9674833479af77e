#include "core/plm_file.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>


#include "core/geometry.h"
#include "core/settings.h"

namespace petdaq {

// Records are written straight from memory: their in-memory layout is the little-endian wire
// form (proto/records.h).
static_assert(kHostIsLittleEndian, "the .plm writer and reader assume a little-endian host");

namespace {
constexpr std::size_t kFileBufferBytes = 4u << 20;

std::string describe_errno() { return std::strerror(errno); }

}  // namespace

void check_message_bytes(const std::filesystem::path& path, const MessageHeader& header,
                         std::size_t bytes) {
  if (bytes != std::size_t{header.record_count} * header.record_size)
    throw PlmError(path.string() + ": message of " + std::to_string(header.record_count) +
                   " records of " + std::to_string(header.record_size) + " bytes given " +
                   std::to_string(bytes) + " bytes");
}

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

}  // namespace petdaq
