// Memory for the bodies of messages on their way out (DESIGN section 7), taken once at
// start-up, so that delivering a slice allocates nothing and its records are not copied
// again: petdaqd's publisher hands pieces to libzmq (zmq_msg_init_data), the .plm writer
// (core/plm_file.h) to its writer threads. The thread that collects slices lends pieces in
// order of a ring of bytes; a piece returns when every holder has let go of it: the slice
// being delivered (a backend may write its records straight into a lent piece,
// core/backend.h ResultMemory) and each message made from it, let go of on another thread
// (libzmq's I/O thread once the message is written to every subscriber or dropped, a writer
// thread once the bytes are in the file). Pieces come back roughly in the order they were
// lent; the ring reclaims them in that order, so one piece a slow holder still holds keeps
// the space after it from being lent again until it returns. When no room is left the
// caller falls back to a copy (petdaqd counts it in out.message_copies).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/backend.h"
#include "core/host_allocator.h"
#include "core/settings.h"

namespace petdaq {

class MessageArena final : public ResultMemory {
 public:
  // Pieces lent and not yet reclaimed, at most.
  static constexpr std::size_t kMaxPieces = 1024;
  // Its bytes: output.zmq.message_buffer_bytes (0: no arena).
  static std::size_t memory_bytes(const Settings& s) { return s.output.zmq.message_buffer_bytes; }

  // `bytes` from `allocator` (page-locked for CUDA when the GPU backend runs, so that a
  // device-to-host copy lands in it directly), touched once so that no page faults later.
  MessageArena(std::size_t bytes, HostAllocator& allocator);
  ~MessageArena() override;
  MessageArena(const MessageArena&) = delete;
  MessageArena& operator=(const MessageArena&) = delete;

  // A piece of at least `bytes` held once by the caller, or null when the ring has no room.
  // Only the thread that made the arena's first lend may lend or hold.
  void* lend(std::size_t bytes) override;
  bool owns(const void* p) const;
  // One more holder of the piece that starts at `p` (lent and not yet let go of); returns
  // the hint for let_go_message(), for a ZeroMQ message that is to let go of it.
  void* hold(const void* p);
  // One holder lets go of the piece that starts at `p`; any thread.
  void let_go(const void* p);
  // The same for libzmq's free function (zmq_free_fn): `hint` is the piece.
  static void let_go_message(void* data, void* hint);
  // One more holder of `bytes` at `body`: the piece itself where the arena lent it, else a
  // piece lent now with the bytes copied in. Returns where the bytes lie in the arena and
  // sets `hint` (for let_go_message()), or null, `hint` untouched, when there is no room.
  void* hold_or_copy(const void* body, std::size_t bytes, void*& hint);
  // The collecting thread, once a slice is delivered: lets go of the lend's hold on each of
  // its outputs (prompts, delayed, singles) that lies in the arena.
  void let_go_lent(const SliceResult& result);

  std::size_t capacity() const { return capacity_; }
  // Pieces lent and not yet reclaimed (the worker's view; for tests).
  std::size_t pieces_in_use();

 private:
  struct Piece {
    std::uint64_t begin = 0;  // position in the byte ring (grows without wrapping)
    std::uint64_t end = 0;
    std::atomic<std::uint32_t> holders{0};
    MessageArena* arena = nullptr;
  };
  void reclaim();
  Piece& piece_at(const void* p);

  HostAllocator& allocator_;
  std::size_t capacity_;
  std::uint8_t* base_;
  std::unique_ptr<Piece[]> pieces_;
  std::uint64_t head_ = 0;  // bytes lent so far
  std::uint64_t tail_ = 0;  // bytes reclaimed so far
  std::uint64_t first_piece_ = 0;  // oldest piece not reclaimed
  std::uint64_t next_piece_ = 0;   // pieces lent so far
};

}  // namespace petdaq
