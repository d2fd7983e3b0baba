// A C++17 protocol host (docs/protocol.md) for the toy LRU manager of toy.hpp: what
// `kvoffload check --exec ./host` drives live, with the same random, shrinking,
// stateful checks as a Python target, and no Python binding. Build and check:
//
//   g++ -std=c++17 -O1 -o host corpus/replayer/host.cpp      (Debian: nlohmann-json3-dev)
//   kvoffload check --exec ./host --level exact              # the toy's policy: LRU
//
// One JSON object per line on standard input (requests), one per line on standard
// output (answers), in order. To check your own engine, replace the Toy's methods
// with calls into it; keep standard output for the protocol (log to standard error).
// The host ends at "bye" or at the end of its input (the judge is gone).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "toy.hpp"

namespace {

constexpr int kProtocol = 1;

void answer(const json& message) {
  std::cout << message.dump() << '\n' << std::flush;
}

json refused(const std::string& kind, const std::string& why) {
  return {{"answer", "refused"}, {"kind", kind}, {"message", why}};
}

// The spec's misuse errors, by the code the toy throws (docs/native-api.md).
json raised(const std::string& code) {
  std::string type = code == "load-not-ready" ? "NotReadable" : "UnmatchedCompleteLoad";
  return {{"answer", "raised"}, {"type", type}, {"code", code},
          {"message", "[" + code + "] rejected by the C++ toy"}, {"rejection", true}};
}

std::vector<Key> keys_of(const json& call) {
  std::vector<Key> out;
  if (call.contains("keys"))
    for (auto& k : call["keys"]) out.push_back(k.dump());
  return out;
}

json returned(json value) { return {{"answer", "returned"}, {"value", std::move(value)}}; }

json call(Toy& toy, const json& body) {
  const std::string op = body.at("op");
  const std::vector<Key> keys = keys_of(body);
  const json ticket = body.contains("ticket") ? body["ticket"] : json(nullptr);
  try {
    if (op == "lookup") return returned({{"kind", "lookup"}, {"result", toy.lookup(keys.at(0))}});
    if (op == "prepare_store") {
      json plan = toy.prepare_store(keys);
      if (plan["rejected"])
        return returned({{"kind", "rejected"}, {"needed", plan["needed"]}, {"available", plan["available"]}});
      plan.erase("rejected");
      plan["kind"] = "store_plan";
      return returned(plan);
    }
    if (op == "complete_store") {
      json done = toy.complete_store(keys, body.value("success", true), ticket);
      done["kind"] = "completion";
      return returned(done);
    }
    if (op == "prepare_load") {
      json plan = toy.prepare_load(keys);
      plan["kind"] = "load_plan";
      return returned(plan);
    }
    if (op == "complete_load") {
      json done = toy.complete_load(keys, ticket);
      done["kind"] = "completion";
      return returned(done);
    }
    if (op == "touch") {
      toy.touch(keys);
      return returned({{"kind", "none"}});
    }
    if (op == "reset_cache") return returned({{"kind", "reset"}, {"epoch", toy.reset_cache()}});
    if (op == "take_events") {
      json events = toy.take_events();
      return returned({{"kind", "events"}, {"net", true},
                       {"batches", json::array({{{"removed", true}, {"keys", events["removed"]}},
                                                {{"removed", false}, {"keys", events["stored"]}}})}});
    }
  } catch (const std::string& code) {
    return raised(code);
  }
  return refused("protocol", "unknown op " + op);
}

json built() {
  return {{"answer", "built"}, {"protocol", kProtocol}, {"adapter", "native"},
          {"why", "the C++17 toy LRU manager (corpus/replayer/host.cpp)"},
          {"capabilities", {{"touch", true}, {"reset", true}, {"events", true},
                            {"completion_tickets", true}, {"typed_misuse", true},
                            {"strict_lookup", true}}}};
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::unique_ptr<Toy> toy;
  std::string line;
  while (std::getline(std::cin, line)) {
    json message;
    try {
      message = json::parse(line);
    } catch (const json::exception& e) {
      answer(refused("protocol", std::string("not JSON: ") + e.what()));
      continue;
    }
    const std::string request = message.value("request", "");
    if (request == "bye") return 0;
    try {
      if (request == "hello") {
        if (message.value("protocol", 0) != kProtocol) answer(refused("usage", "the toy speaks protocol 1"));
        else if (message["config"].value("policy", "lru") != "lru")
          answer(refused("usage", "the toy evicts in LRU order only: check it with --policy lru"));
        else answer({{"answer", "hello"}, {"protocol", kProtocol}});
      } else if (request == "new") {
        toy = std::make_unique<Toy>(message.at("capacity").get<int>());
        answer(built());
      } else if (request == "call" && toy) {
        answer(call(*toy, message.at("call")));
      } else {
        answer(refused("protocol", "unexpected request " + request));
      }
    } catch (const json::exception& e) {
      answer(refused("protocol", std::string("malformed request: ") + e.what()));
    }
  }
  return 0;
}
