#include "core/message_arena.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace petdaq {

namespace {
// Pieces start on cache lines.
constexpr std::uint64_t kAlign = 64;
std::uint64_t round_up(std::uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

MessageArena::MessageArena(std::size_t bytes, HostAllocator& allocator)
    : allocator_(allocator),
      capacity_(static_cast<std::size_t>(round_up(bytes))),
      base_(nullptr),
      pieces_(std::make_unique<Piece[]>(kMaxPieces)) {
  if (capacity_ == 0) throw std::invalid_argument("MessageArena: no bytes");
  base_ = static_cast<std::uint8_t*>(allocator_.allocate(capacity_));
  std::memset(base_, 0, capacity_);
  for (std::size_t i = 0; i < kMaxPieces; ++i) pieces_[i].arena = this;
}

MessageArena::~MessageArena() { allocator_.deallocate(base_, capacity_); }

bool MessageArena::owns(const void* p) const {
  const auto* b = static_cast<const std::uint8_t*>(p);
  return b >= base_ && b < base_ + capacity_;
}

// Pieces whose holders all let go, from the oldest on, give their bytes back.
void MessageArena::reclaim() {
  while (first_piece_ < next_piece_) {
    Piece& piece = pieces_[first_piece_ % kMaxPieces];
    if (piece.holders.load(std::memory_order_acquire) != 0) break;
    tail_ = piece.end;
    ++first_piece_;
  }
}

void* MessageArena::lend(std::size_t bytes) {
  reclaim();
  const std::uint64_t size = round_up(bytes == 0 ? 1 : bytes);
  if (size > capacity_ || next_piece_ - first_piece_ == kMaxPieces) return nullptr;
  // A piece never wraps: one that would cross the end starts at the next turn.
  std::uint64_t begin = head_;
  const std::uint64_t offset = begin % capacity_;
  if (offset + size > capacity_) begin += capacity_ - offset;
  if (begin + size - tail_ > capacity_) return nullptr;
  Piece& piece = pieces_[next_piece_ % kMaxPieces];
  piece.begin = begin;
  piece.end = begin + size;
  piece.holders.store(1, std::memory_order_relaxed);
  ++next_piece_;
  head_ = begin + size;
  return base_ + begin % capacity_;
}

MessageArena::Piece& MessageArena::piece_at(const void* p) {
  const auto offset = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(p) - base_);
  // The pieces in use are few (a handful per slice in flight): newest first.
  for (std::uint64_t i = next_piece_; i > first_piece_; --i) {
    Piece& piece = pieces_[(i - 1) % kMaxPieces];
    if (piece.begin % capacity_ == offset && piece.holders.load(std::memory_order_relaxed) != 0)
      return piece;
  }
  throw std::logic_error("MessageArena: " + std::to_string(offset) +
                         " is not the start of a piece in use");
}

void* MessageArena::hold(const void* p) {
  Piece& piece = piece_at(p);
  piece.holders.fetch_add(1, std::memory_order_relaxed);
  return &piece;
}

void MessageArena::let_go(const void* p) {
  piece_at(p).holders.fetch_sub(1, std::memory_order_release);
}

void MessageArena::let_go_message(void*, void* hint) {
  static_cast<Piece*>(hint)->holders.fetch_sub(1, std::memory_order_release);
}

void* MessageArena::hold_or_copy(const void* body, std::size_t bytes, void*& hint) {
  if (owns(body)) {
    hint = hold(body);
    return const_cast<void*>(body);
  }
  void* piece = lend(bytes);
  if (!piece) return nullptr;
  std::memcpy(piece, body, bytes);
  // The new holder takes over the lend's hold.
  hint = &piece_at(piece);
  return piece;
}

void MessageArena::let_go_lent(const SliceResult& result) {
  for (const void* lent : {static_cast<const void*>(result.prompts),
                           static_cast<const void*>(result.delayed),
                           static_cast<const void*>(result.singles)})
    if (lent && owns(lent)) let_go(lent);
}

std::size_t MessageArena::pieces_in_use() {
  reclaim();
  return static_cast<std::size_t>(next_piece_ - first_piece_);
}

}  // namespace petdaq
