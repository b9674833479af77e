// The settings loader on arbitrary YAML text: it accepts (and the result validates) or it
// refuses with a SettingsError naming a key; nothing else may escape.
#include <cstdint>
#include <string>

#include "core/settings.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const petdaq::Settings s = petdaq::parse_settings(text, "/nonexistent");
    (void)petdaq::output_settings_hash(s);
  } catch (const petdaq::SettingsError&) {
  }
  return 0;
}
