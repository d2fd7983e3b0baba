// The toy LRU manager shared by the corpus replayer (replay.cpp) and the protocol host
// (host.cpp): a table of blocks, a queue of evictable keys, tickets from a counter, and
// the copies a reset left running (each keeps its slot until its last job's completion,
// in either completion form). Keys are their JSON text ("\"a\"" or "7").
//
// TOY_BUG seeds one bug, of the families of `kvoffload check --self-test`, so that the
// tests can see the replayer and the live check catch it:
//   1 plans keep epoch 0 after a reset                       (epochs)
//   2 events announce READY keys again                       (events)
//   3 a block being read can be evicted (EvictsPinnedBlock)  (eviction-choice)
//   4 a failed store is marked READY anyway                  (FailedStoreStaysVisible)
//   5 prepare_load([k, k]) pins k twice (PrepareLoadDoublePins)  (liveness)
//   6 a reset frees the slots of running copies (ResetFreesRunningSlots)  (slots)
//   7 a store evicts the most recent evictable keys, not the least (MruEviction)
//     (eviction-choice, at level exact only)
#pragma once
#include <algorithm>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#ifndef TOY_BUG  // the tests build seeded bugs into the toy (above)
#define TOY_BUG 0
#endif

using json = nlohmann::json;
using Key = std::string;  // a key's JSON text: "\"a\"" or "7"

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
      Key v = TOY_BUG == 7 ? candidates[candidates.size() - 1 - i] : candidates[i];
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
      if (success || TOY_BUG == 4) { it->second.phase = Phase::Ready; lru.push_back(k); }
      else table.erase(it);
    }
    return done;
  }
  json prepare_load(const std::vector<Key>& keys) {
    for (auto& k : keys)
      if (lookup(k) != "HIT") throw std::string("load-not-ready");
    std::vector<Key> once;
    for (auto& k : keys)
      if (TOY_BUG == 5 || std::find(once.begin(), once.end(), k) == once.end()) once.push_back(k);
    long ticket = next_ticket++;
    std::vector<int> slots;
    for (auto& k : once) {
      Block& b = table[k];
      if (b.loads.empty() && TOY_BUG != 3) unqueue(k);
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
      if (loads->empty()) { unqueue(k); lru.push_back(k); }
      done["applied"].push_back(json::parse(k));
    }
    return done;
  }
  long reset_cache() {  // every block goes; running copies keep their slots until they finish
    for (auto& kv : table) {
      const Block& b = kv.second;
      if (TOY_BUG == 6) break;
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

