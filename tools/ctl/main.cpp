// petdaq-ctl: names what petdaqd acquires (docs/operations.md, "Acquisitions"). One request
// to the daemon's control endpoint (output.control.endpoint), one reply printed:
//   petdaq-ctl -c petdaq.yaml start --name mouse-17 --subject M17 --isotope F-18 ...
//   petdaq-ctl -c petdaq.yaml annotate "injection"
//   petdaq-ctl -c petdaq.yaml stop
//   petdaq-ctl -c petdaq.yaml status [--json]
// Exit codes: 0 done, 1 refused by the daemon (the reason is printed) or no answer, 2 usage.
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/cli.h"
#include "core/settings.h"

namespace {

using namespace petdaq;
using nlohmann::json;
constexpr const char* kProgram = "petdaq-ctl";

struct Options {
  std::filesystem::path config;
  std::string endpoint;
  int timeout_ms = 5000;
  bool json_out = false;
  std::string curve_server_public;
  std::filesystem::path curve_client_keys;
  // start
  std::string name, subject, isotope, operator_name, notes;
  std::optional<double> activity_MBq;
  // annotate
  std::string text;
};

std::string describe(const json& a) {
  if (a.is_null()) return "no acquisition is open";
  std::string out = "acquisition " + std::to_string(a.value("id", 0)) + " '" +
                    a.value("name", std::string()) + "'";
  for (const char* key : {"subject", "isotope", "operator", "notes"}) {
    const std::string v = a.value(key, std::string());
    if (!v.empty()) out += std::string(", ") + key + " " + v;
  }
  if (a.contains("activity_MBq") && a["activity_MBq"].is_number())
    out += ", " + std::to_string(a["activity_MBq"].get<double>()) + " MBq";
  if (a.contains("ended_unix_ns") && a["ended_unix_ns"].is_number())
    out += ", ended (" + a.value("end_reason", std::string()) + ")";
  else
    out += ", open";
  if (a.contains("annotations") && a["annotations"].is_array() && !a["annotations"].empty())
    out += ", " + std::to_string(a["annotations"].size()) + " annotation(s)";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  cli::App app(kProgram, "Name what petdaqd acquires: start and stop named acquisitions with "
                         "their metadata, annotate them, ask the daemon's status.");
  cli::add_config(app, o.config, "petdaq configuration: the control endpoint (output.control.endpoint)");
  app.add_option("--endpoint", o.endpoint,
                 "the daemon's control endpoint (default: output.control.endpoint of --config)")
      ->type_name("EP");
  app.add_option("--timeout-ms", o.timeout_ms, "how long to wait for the daemon's answer")
      ->check(CLI::Range(1, 600000))
      ->type_name("MS");
  app.add_flag("--json", o.json_out, "print the daemon's reply as JSON");
  app.add_option("--curve-server-public", o.curve_server_public,
                 "CURVE: the daemon's public key (Z85), where the daemon has CURVE keys")
      ->type_name("Z85");
  app.add_option("--curve-client-keys", o.curve_client_keys,
                 "CURVE: a file with this client's public and secret key (Z85, one a line)")
      ->check(CLI::ExistingFile)
      ->type_name("FILE");
  app.require_subcommand(1, 1);
  app.fallthrough();  // the options above also after the subcommand
  CLI::App* start = app.add_subcommand("start", "open a named acquisition (refused while one is open)");
  start->add_option("--name", o.name, "the acquisition's name")->required()->type_name("NAME");
  start->add_option("--subject", o.subject, "subject or phantom")->type_name("TEXT");
  start->add_option("--isotope", o.isotope, "isotope, e.g. F-18")->type_name("TEXT");
  start->add_option("--activity-MBq", o.activity_MBq, "activity at the start")
      ->check(CLI::NonNegativeNumber)
      ->type_name("MBQ");
  start->add_option("--operator", o.operator_name, "who runs it")->type_name("TEXT");
  start->add_option("--notes", o.notes, "free text")->type_name("TEXT");
  CLI::App* stop = app.add_subcommand("stop", "close the open acquisition");
  CLI::App* annotate = app.add_subcommand("annotate", "add a time-stamped note to the open acquisition");
  annotate->add_option("text", o.text, "the note")->required()->type_name("TEXT");
  CLI::App* status = app.add_subcommand("status", "the open acquisition and the daemon's latest rates");
  if (const auto rc = app.parse_or_exit(argc, argv)) return *rc;
  if (o.curve_server_public.empty() != o.curve_client_keys.empty())
    return app.usage_error("--curve-server-public and --curve-client-keys go together");

  if (o.endpoint.empty()) {
    Settings s;
    if (!o.config.empty()) {
      try {
        s = load_settings(o.config);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
        return cli::kExitUsage;
      }
    }
    o.endpoint = s.output.control.endpoint;
    if (o.endpoint.empty())
      return app.usage_error("no control endpoint: give --endpoint, or --config with "
                             "output.control.endpoint set");
  }

  json request;
  if (start->parsed()) {
    request = {{"command", "start"}, {"name", o.name}, {"subject", o.subject},
               {"isotope", o.isotope}, {"operator", o.operator_name}, {"notes", o.notes}};
    request["activity_MBq"] = o.activity_MBq ? json(*o.activity_MBq) : json(nullptr);
  } else if (stop->parsed()) {
    request = {{"command", "stop"}};
  } else if (annotate->parsed()) {
    request = {{"command", "annotate"}, {"text", o.text}};
  } else if (status->parsed()) {
    request = {{"command", "status"}};
  }

  try {
    zmq::context_t context(1);
    zmq::socket_t socket(context, zmq::socket_type::req);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::rcvtimeo, o.timeout_ms);
    socket.set(zmq::sockopt::sndtimeo, o.timeout_ms);
    if (!o.curve_server_public.empty()) {
      std::ifstream keys(o.curve_client_keys);
      std::string pub, sec;
      if (!(keys >> pub >> sec) || pub.size() != 40 || sec.size() != 40) {
        std::fprintf(stderr, "%s: %s: expected a public and a secret Z85 key (40 characters each)\n",
                     kProgram, o.curve_client_keys.c_str());
        return cli::kExitUsage;
      }
      socket.set(zmq::sockopt::curve_serverkey, o.curve_server_public);
      socket.set(zmq::sockopt::curve_publickey, pub);
      socket.set(zmq::sockopt::curve_secretkey, sec);
    }
    socket.connect(o.endpoint);
    const std::string text = request.dump();
    if (!socket.send(zmq::buffer(text), zmq::send_flags::none)) {
      std::fprintf(stderr, "%s: could not send to %s within %d ms\n", kProgram, o.endpoint.c_str(),
                   o.timeout_ms);
      return 1;
    }
    zmq::message_t reply;
    if (!socket.recv(reply)) {
      std::fprintf(stderr, "%s: no answer from %s within %d ms (is petdaqd running with "
                   "output.control.endpoint there?)\n", kProgram, o.endpoint.c_str(), o.timeout_ms);
      return 1;
    }
    const json r = json::parse(reply.to_string(), nullptr, false);
    if (r.is_discarded() || !r.is_object()) {
      std::fprintf(stderr, "%s: the daemon's reply is not JSON\n", kProgram);
      return 1;
    }
    if (o.json_out) std::printf("%s\n", r.dump(2).c_str());
    if (!r.value("ok", false)) {
      std::fprintf(stderr, "%s: refused: %s\n", kProgram, r.value("error", std::string("?")).c_str());
      return 1;
    }
    if (!o.json_out) {
      const json a = r.value("acquisition", json(nullptr));
      if (start->parsed()) std::printf("started %s\n", describe(a).c_str());
      if (stop->parsed()) std::printf("stopped %s\n", describe(a).c_str());
      if (annotate->parsed()) std::printf("annotated %s\n", describe(a).c_str());
      if (status->parsed()) {
        std::printf("%s\n", describe(a).c_str());
        const json rates = r.value("rates", json(nullptr));
        if (rates.is_object())
          std::printf("run %llu, backend %s, uptime %.0f s, %zu alarm(s)\n",
                      static_cast<unsigned long long>(rates.value("run_id", 0ull)),
                      rates.value("backend", std::string("?")).c_str(), rates.value("uptime_s", 0.0),
                      rates.value("alarms", json::array()).size());
      }
    }
  } catch (const zmq::error_t& e) {
    std::fprintf(stderr, "%s: %s: %s\n", kProgram, o.endpoint.c_str(), e.what());
    return 1;
  }
  return 0;
}
