// A C++17 replayer for the kvoffload trace corpus (docs/corpus.md), against the toy LRU
// manager of toy.hpp. Build and run:
//
//   g++ -std=c++17 -O1 -o replay corpus/replayer/replay.cpp   (Debian: nlohmann-json3-dev)
//   ./replay DIR            # replays DIR/cases/*.json listed in DIR/index.json
//   ./replay DIR --level any
//
// The toy evicts in LRU order, so by default it replays at level exact with policy lru:
// every case but those of level "exact" with policy "arc", an LRU case's victims exactly
// the spec's `evicted`, an ARC case's (level "any") from the last call's
// `evicted_from`. With --level any (an engine that evicts any allowed block) the cases
// of level "exact" are skipped and every choice is checked against `evicted_from`. The
// toy has everything else: resets (copies still running keep their slots until their
// completions arrive), both completion forms, plan epochs, and events as the net change
// since the last take_events.
// Exit status: 0 every replayed case passed, 1 some failed, 2 the corpus is unreadable.
#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "toy.hpp"

struct Failed { std::string why; };

// ---------------------------------------------------------------- the replayer
std::vector<Key> keys_of(const json& v) {
  std::vector<Key> out;
  for (auto& k : v) out.push_back(k.dump());
  return out;
}
std::multiset<Key> bag(const json& v) { auto k = keys_of(v); return {k.begin(), k.end()}; }
void same(const json& want, const json& got, const char* what) {
  if (bag(want) != bag(got)) throw Failed{std::string(what) + ": expected " + want.dump() + ", got " + got.dump()};
}

struct Bindings {
  int capacity;
  std::map<std::string, long> slots, tickets;
  std::vector<std::string> held;  // slot names held once this step is done
  long epoch = 0;                 // the last reset's epoch: every plan's
  std::set<Key> subscriber;       // the READY set the events so far add up to
  void slot(const std::string& name, long value) {
    if (slots.count(name)) {
      if (slots[name] != value) throw Failed{"slot " + name + " changed"};
      return;
    }
    if (value < 0 || value >= capacity) throw Failed{"slot out of range"};
    for (auto& h : held)
      if (slots.count(h) && slots[h] == value) throw Failed{"slot " + std::to_string(value) + " still held by " + h};
    slots[name] = value;
  }
  void ticket(const std::string& name, long value) {
    for (auto& kv : tickets) if (kv.second == value) throw Failed{"ticket issued twice"};
    tickets[name] = value;
  }
  json ticket_value(const json& call) {
    if (!call.contains("ticket")) return nullptr;
    std::string name = call["ticket"];
    if (tickets.count(name)) return tickets[name];
    long top = 0;
    for (auto& kv : tickets) top = std::max(top, kv.second);
    return top + 1000003;  // "u0": a ticket the target never issued
  }
};

// any_victim: an allowed victim is enough where the spec chose (`evicted_from`), not
// the policy's exact one (level any, or a case of a policy the toy does not follow).
void step(Toy& toy, Bindings& names, const json& call, const json& expect, bool any_victim) {
  std::string op = call["op"], kind = expect["kind"];
  std::vector<Key> keys = call.contains("keys") ? keys_of(call["keys"]) : std::vector<Key>{};
  json got;
  try {
    if (op == "lookup") got = toy.lookup(keys.at(0));
    else if (op == "prepare_store") got = toy.prepare_store(keys);
    else if (op == "complete_store") got = toy.complete_store(keys, call.value("success", true), names.ticket_value(call));
    else if (op == "prepare_load") got = toy.prepare_load(keys);
    else if (op == "complete_load") got = toy.complete_load(keys, names.ticket_value(call));
    else if (op == "touch") toy.touch(keys);
    else if (op == "take_events") got = toy.take_events();
    else if (op == "reset_cache") got = toy.reset_cache();
  } catch (const std::string& family) {
    if (kind != "error" || expect["family"] != family) throw Failed{op + " rejected [" + family + "], expected " + kind};
    return;
  }
  if (kind == "error") throw Failed{op + " must be rejected [" + expect["family"].get<std::string>() + "]"};
  if (kind == "lookup" && got != expect["result"]) throw Failed{"lookup: expected " + expect["result"].dump() + ", got " + got.dump()};
  if (kind == "rejected" && (!got["rejected"] || got["needed"] != expect["needed"] || got["available"] != expect["available"]))
    throw Failed{"expected a rejection " + expect.dump() + ", got " + got.dump()};
  if (kind == "store_plan" || kind == "load_plan") {
    if (got.value("rejected", false)) throw Failed{"rejected, expected " + kind};
    if (keys_of(got["keys"]) != keys_of(expect["keys"])) throw Failed{"keys: expected " + expect["keys"].dump() + ", got " + got["keys"].dump()};
    if (kind == "store_plan" && expect.contains("evicted_from") && any_victim) {  // a last-call choice
      auto allowed = bag(expect["evicted_from"]), chosen = bag(got["evicted"]);
      bool ok = chosen.size() == expect["evicted"].size() &&
                std::set<Key>(chosen.begin(), chosen.end()).size() == chosen.size();
      for (auto& k : chosen) ok = ok && allowed.count(k);
      if (!ok) throw Failed{"evicted " + got["evicted"].dump() + ", not from " + expect["evicted_from"].dump()};
      std::map<Key, std::string> slot_of;  // the chosen victims' slots are free, not the spec's
      for (size_t i = 0; i < expect["evicted_from"].size(); ++i)
        slot_of[expect["evicted_from"][i].dump()] = expect["evicted_from_slots"][i];
      for (auto& k : keys_of(expect["evicted"])) names.held.push_back(slot_of[k]);
      for (auto& k : chosen)
        names.held.erase(std::remove(names.held.begin(), names.held.end(), slot_of[k]), names.held.end());
    } else if (kind == "store_plan") same(expect["evicted"], got["evicted"], "evicted");
    for (size_t i = 0; i < expect["slots"].size(); ++i) names.slot(expect["slots"][i], got["slots"][i]);
    names.ticket(expect["ticket"], got["ticket"]);
    if (got["epoch"] != names.epoch)
      throw Failed{kind + " epoch: expected " + std::to_string(names.epoch) + " (the last reset's), got " + got["epoch"].dump()};
  }
  if (kind == "completion")
    for (const char* part : {"applied", "released", "ignored"}) same(expect[part], got[part], part);
  if (kind == "reset") {
    if (got != expect["epoch"]) throw Failed{"reset_cache: expected epoch " + expect["epoch"].dump() + ", got " + got.dump()};
    names.epoch = expect["epoch"].get<long>();
  }
  if (kind == "events") {  // applied to the subscriber, removed then stored, as a net change
    for (auto& k : keys_of(got["removed"]))
      if (!names.subscriber.erase(k)) throw Failed{"events remove " + k + ", which the subscriber lacks: not the net change"};
    for (auto& k : keys_of(got["stored"]))
      if (!names.subscriber.insert(k).second) throw Failed{"events store " + k + ", which the subscriber has: not the net change"};
    json ready = json::array();
    for (auto& k : names.subscriber) ready.push_back(json::parse(k));
    same(expect["ready"], ready, "the subscriber's READY set");
  }
}

int main(int argc, char** argv) {
  bool level_any = argc == 4 && std::string(argv[2]) == "--level" && std::string(argv[3]) == "any";
  bool level_exact = argc == 4 && std::string(argv[2]) == "--level" && std::string(argv[3]) == "exact";
  if (argc != 2 && !level_any && !level_exact) {
    std::fprintf(stderr, "usage: replay DIR [--level any|exact]\n");
    return 2;
  }
  std::string dir = argv[1];
  json index;
  try { std::ifstream(dir + "/index.json") >> index; } catch (...) { std::fprintf(stderr, "cannot read %s/index.json\n", dir.c_str()); return 2; }
  if (index.value("corpus_version", 0) != 1) { std::fprintf(stderr, "corpus version is not 1\n"); return 2; }
  int passed = 0, failed = 0, skipped = 0;
  for (auto& name : index["cases"]) {
    json c;
    try { std::ifstream(dir + "/cases/" + name.get<std::string>() + ".json") >> c; } catch (...) { std::fprintf(stderr, "cannot read case %s\n", name.dump().c_str()); return 2; }
    if (c["level"] == "exact" && (level_any || c["policy"] != "lru")) { ++skipped; continue; }
    const bool any_victim = level_any || c["policy"] != "lru";
    Toy toy(c["capacity"]);
    Bindings names{c["capacity"].get<int>(), {}, {}, {}};
    size_t i = 0;
    try {
      for (; i < c["steps"].size(); ++i) {
        names.held = c["steps"][i]["held"].get<std::vector<std::string>>();
        step(toy, names, c["steps"][i]["call"], c["steps"][i]["expect"], any_victim);
      }
      ++passed;
    } catch (const Failed& f) {
      ++failed;
      if (failed <= 10) std::printf("FAILED %s at step %zu: %s\n", name.get<std::string>().c_str(), i + 1, f.why.c_str());
    }
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
