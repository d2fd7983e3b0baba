// A C++17 replayer for the kvoffload trace corpus (docs/corpus.md), against a toy LRU
// manager written here. Build and run:
//
//   g++ -std=c++17 -O1 -o replay corpus/replayer/replay.cpp   (Debian: nlohmann-json3-dev)
//   ./replay DIR            # replays DIR/cases/*.json listed in DIR/index.json
//
// The toy evicts in LRU order, so it replays cases of level "any" and cases of level
// "exact" with policy "lru". It has everything else: resets (copies still running keep
// their slots until their completions arrive), both completion forms, plan epochs, and
// events as the net change since the last take_events.
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

#ifndef TOY_BUG  // the tests build seeded bugs into the toy to see the replayer catch them:
#define TOY_BUG 0  // 1: plans keep epoch 0 after a reset; 2: events announce READY keys again
#endif

using json = nlohmann::json;
using Key = std::string;  // a key's JSON text: "\"a\"" or "7"

struct Failed { std::string why; };

json as_json(const std::vector<Key>& keys) {  // key texts back to JSON values
  json out = json::array();
  for (auto& k : keys) out.push_back(json::parse(k));
  return out;
}

// ---------------------------------------------------------------- the toy manager
enum class Phase { Storing, Ready };
struct Block { Phase phase; int slot; long store_ticket; std::deque<long> loads; };

struct Orphan { Key key; bool store; int slot; std::deque<long> tickets; };  // a copy a reset left running

struct Toy {
  int capacity;
  std::map<Key, Block> table;
  std::deque<Key> lru;            // evictable keys, least recent first
  std::vector<Orphan> orphans;    // copies reset_cache left running, oldest first
  std::set<Key> announced;        // what take_events has reported as READY
  long next_ticket = 0, epoch = 0;
  explicit Toy(int c) : capacity(c) {}

  std::vector<int> free_slots() const {
    std::vector<int> f;
    for (int s = 0; s < capacity; ++s) {
      bool used = false;
      for (auto& kv : table) used |= kv.second.slot == s;
      for (auto& o : orphans) used |= o.slot == s;
      if (!used) f.push_back(s);
    }
    return f;
  }
  // The running copy of `key` (a store, or a load) that job `ticket` belongs to (null:
  // the oldest such copy); orphans.end() if none.
  std::vector<Orphan>::iterator orphan(const Key& key, bool store, const json& ticket) {
    for (auto it = orphans.begin(); it != orphans.end(); ++it)
      if (it->key == key && it->store == store &&
          (ticket.is_null() || std::find(it->tickets.begin(), it->tickets.end(), ticket.get<long>()) != it->tickets.end()))
        return it;
    return orphans.end();
  }
  // Job `ticket` (null: the oldest) of that copy finished; the last one frees its slot.
  void release(std::vector<Orphan>::iterator it, const json& ticket) {
    auto& t = it->tickets;
    t.erase(ticket.is_null() ? t.begin() : std::find(t.begin(), t.end(), ticket.get<long>()));
    if (t.empty()) orphans.erase(it);
  }
  void unqueue(const Key& k) { lru.erase(std::remove(lru.begin(), lru.end(), k), lru.end()); }
  std::string lookup(const Key& k) const {
    auto it = table.find(k);
    if (it == table.end()) return "MISS";
    return it->second.phase == Phase::Storing ? "PENDING" : "HIT";
  }
  // -> (accepted, keys, slots, evicted, ticket, needed, available)
  json prepare_store(const std::vector<Key>& keys) {
    std::vector<Key> fresh;
    for (auto& k : keys)
      if (!table.count(k) && std::find(fresh.begin(), fresh.end(), k) == fresh.end())
        fresh.push_back(k);
    auto free = free_slots();
    std::vector<Key> candidates;  // LRU order, not named in the call
    for (auto& k : lru)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) candidates.push_back(k);
    int needed = fresh.size(), available = free.size() + candidates.size();
    if (needed > available) return {{"rejected", true}, {"needed", needed}, {"available", available}};
    std::vector<Key> evicted;
    const int to_evict = needed - (int)free.size();  // free grows as victims go
    for (int i = 0; i < to_evict; ++i) {
      Key v = candidates[i];
      free.push_back(table[v].slot);
      table.erase(v);
      unqueue(v);
      evicted.push_back(v);
    }
    std::sort(free.begin(), free.end());
    long ticket = next_ticket++;
    std::vector<int> slots;
    for (size_t i = 0; i < fresh.size(); ++i) {
      table[fresh[i]] = Block{Phase::Storing, free[i], ticket, {}};
      slots.push_back(free[i]);
    }
    return {{"rejected", false}, {"keys", as_json(fresh)}, {"slots", slots}, {"evicted", as_json(evicted)},
            {"ticket", ticket}, {"epoch", TOY_BUG == 1 ? 0 : epoch}};
  }
  json complete_store(const std::vector<Key>& keys, bool success, const json& ticket) {
    json done = {{"applied", json::array()}, {"released", json::array()}, {"ignored", json::array()}};
    std::vector<Key> once;  // a key named twice is completed once
    for (auto& k : keys)
      if (std::find(once.begin(), once.end(), k) == once.end()) once.push_back(k);
    for (auto& k : once) {
      auto it = table.find(k);
      bool match = it != table.end() && it->second.phase == Phase::Storing &&
                   (ticket.is_null() || it->second.store_ticket == ticket.get<long>());
      if (!match) {
        auto o = orphan(k, true, ticket);  // else a store a reset left running: its slot is free
        if (o == orphans.end()) { done["ignored"].push_back(json::parse(k)); continue; }
        release(o, ticket);
        done["released"].push_back(json::parse(k));
        continue;
      }
      done["applied"].push_back(json::parse(k));
      if (success) { it->second.phase = Phase::Ready; lru.push_back(k); }
      else table.erase(it);
    }
    return done;
  }
  json prepare_load(const std::vector<Key>& keys) {
    for (auto& k : keys)
      if (lookup(k) != "HIT") throw std::string("load-not-ready");
    std::vector<Key> once;
    for (auto& k : keys)
      if (std::find(once.begin(), once.end(), k) == once.end()) once.push_back(k);
    long ticket = next_ticket++;
    std::vector<int> slots;
    for (auto& k : once) {
      Block& b = table[k];
      if (b.loads.empty()) unqueue(k);
      b.loads.push_back(ticket);
      slots.push_back(b.slot);
    }
    return {{"keys", as_json(once)}, {"slots", slots}, {"ticket", ticket}, {"epoch", TOY_BUG == 1 ? 0 : epoch}};
  }
  json complete_load(const std::vector<Key>& keys, const json& ticket) {
    std::vector<Key> once;  // a key named twice is completed once
    for (auto& k : keys)
      if (std::find(once.begin(), once.end(), k) == once.end()) once.push_back(k);
    if (ticket.is_null())  // vLLM's form: every key needs a running load, else nothing happens
      for (auto& k : once) {
        auto it = table.find(k);
        if ((it == table.end() || it->second.loads.empty()) && orphan(k, false, ticket) == orphans.end())
          throw std::string("unmatched-complete-load");
      }
    json done = {{"applied", json::array()}, {"released", json::array()}, {"ignored", json::array()}};
    for (auto& k : once) {
      auto it = table.find(k);
      std::deque<long>* loads = it == table.end() ? nullptr : &it->second.loads;
      auto pos = loads ? (ticket.is_null() ? loads->begin()
                                           : std::find(loads->begin(), loads->end(), ticket.get<long>()))
                       : std::deque<long>::iterator();
      if (!loads || loads->empty() || pos == loads->end()) {
        auto o = orphan(k, false, ticket);  // else a load a reset left running
        if (o == orphans.end()) { done["ignored"].push_back(json::parse(k)); continue; }
        release(o, ticket);
        done["released"].push_back(json::parse(k));
        continue;
      }
      loads->erase(pos);
      if (loads->empty()) lru.push_back(k);
      done["applied"].push_back(json::parse(k));
    }
    return done;
  }
  long reset_cache() {  // every block goes; running copies keep their slots until they finish
    for (auto& kv : table) {
      const Block& b = kv.second;
      if (b.phase == Phase::Storing) orphans.push_back({kv.first, true, b.slot, {b.store_ticket}});
      else if (!b.loads.empty()) orphans.push_back({kv.first, false, b.slot, b.loads});
    }
    table.clear();
    lru.clear();
    return ++epoch;
  }
  void touch(const std::vector<Key>& keys) {
    for (auto it = keys.rbegin(); it != keys.rend(); ++it)
      if (std::find(lru.begin(), lru.end(), *it) != lru.end()) { unqueue(*it); lru.push_back(*it); }
  }
  json take_events() {  // the net change of the READY set since the last call
    std::set<Key> ready;
    for (auto& kv : table) if (kv.second.phase == Phase::Ready) ready.insert(kv.first);
    std::vector<Key> stored, removed;
    for (auto& k : ready) if (TOY_BUG == 2 || !announced.count(k)) stored.push_back(k);
    for (auto& k : announced) if (!ready.count(k)) removed.push_back(k);
    announced = ready;
    return {{"stored", as_json(stored)}, {"removed", as_json(removed)}};
  }
};

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

void step(Toy& toy, Bindings& names, const json& call, const json& expect) {
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
    if (kind == "store_plan" && expect.contains("evicted_from")) {  // a last-call choice
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
  if (argc != 2) { std::fprintf(stderr, "usage: replay DIR\n"); return 2; }
  std::string dir = argv[1];
  json index;
  try { std::ifstream(dir + "/index.json") >> index; } catch (...) { std::fprintf(stderr, "cannot read %s/index.json\n", dir.c_str()); return 2; }
  if (index.value("corpus_version", 0) != 1) { std::fprintf(stderr, "corpus version is not 1\n"); return 2; }
  int passed = 0, failed = 0, skipped = 0;
  for (auto& name : index["cases"]) {
    json c;
    try { std::ifstream(dir + "/cases/" + name.get<std::string>() + ".json") >> c; } catch (...) { std::fprintf(stderr, "cannot read case %s\n", name.dump().c_str()); return 2; }
    if (c["level"] == "exact" && c["policy"] != "lru") { ++skipped; continue; }
    Toy toy(c["capacity"]);
    Bindings names{c["capacity"].get<int>(), {}, {}, {}};
    size_t i = 0;
    try {
      for (; i < c["steps"].size(); ++i) {
        names.held = c["steps"][i]["held"].get<std::vector<std::string>>();
        step(toy, names, c["steps"][i]["call"], c["steps"][i]["expect"]);
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
