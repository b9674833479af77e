#include "core/message_builder.h"

#include "core/settings.h"

namespace petdaq {

bool publishes_delayed(const Settings& settings) { return settings.coincidence.delayed.enabled; }

MessageHeader MessageBuilder::build(MessageKind kind, std::uint64_t run_id,
                                    const SliceResult& result) {
  MessageHeader h;
  h.kind = static_cast<std::uint16_t>(kind);
  h.message_id = next_id_[static_cast<int>(kind) & 7]++;
  h.run_id = run_id;
  h.slice_id = result.slice_id;
  h.t_begin = result.t_begin;
  h.t_end = result.t_end;
  switch (kind) {
    case MessageKind::prompts:
      h.record_count = static_cast<std::uint32_t>(result.prompt_count);
      h.record_size = sizeof(CoincRecord);
      break;
    case MessageKind::delayed:
      h.record_count = static_cast<std::uint32_t>(result.delayed_count);
      h.record_size = sizeof(CoincRecord);
      break;
    case MessageKind::singles:
      h.record_count = static_cast<std::uint32_t>(result.single_count);
      h.record_size = sizeof(Single);
      break;
    case MessageKind::histograms:
    case MessageKind::deadtime:
    case MessageKind::image:
    case MessageKind::acquisition: break;
  }
  return h;
}

std::uint64_t MessageBuilder::next_id(MessageKind kind) const {
  return next_id_[static_cast<int>(kind) & 7];
}

}  // namespace petdaq
