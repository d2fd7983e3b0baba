-- kvoffload's spec, LRU policy, ticket completions: the model that
-- `python proofs/check.py --check spec-lru` explores, written again for rumur.
--
-- Written from the spec's text (spec/kvoffload/spec/transitions.py, recency.py),
-- not generated from the Python checker, so that the two can disagree.
-- Keys and slots are scalarsets: rumur's symmetry reduction renames them as the
-- Python checker's canonical form does. The state holds what CacheState holds
-- (blocks, orphans, the LRU queue, the epoch, the subscriber's view) but its
-- tickets: the spec compares tickets only for equality, and with ticket
-- completions each one reaches exactly its job, so the jobs of the Python checker
-- and their tickets are a function of that state (one store per STORING block or
-- store orphan, one load per reader or per orphaned load due): they add no states,
-- and the Python checker's canonical form renames tickets away likewise.
--
-- The environment's calls: prepare_store of one or two distinct keys (atomic:
-- it evicts LRU victims not named in the call, or rejects and changes nothing),
-- prepare_load and touch of one or two keys, the completion of any copy
-- (current stores succeed or fail; a copy a reset left running releases its
-- slot), reset_cache up to RESETS times, take_events. Lookups, misuse and
-- completions naming no running job (duplicate or late reports, which the ticket
-- form ignores) change no state and are not modelled. A two-key
-- complete_store or complete_load equals the two one-key calls in a row under
-- LRU, so one-key completions reach the same states.
--
-- Under the opt-in background eviction (docs/spec.md D14; BACKGROUND below) the
-- tier may also drop any READY key with no readers between calls, on its own, as
-- the spec's evict_in_background does: the block goes, its slot is free, it leaves
-- the LRU queue, and the subscriber learns of it at the next take_events.
--
-- Where the node's failure is on (docs/spec.md D15; NODE_FAILURE below) the node
-- that holds the tier may fail in any state, any number of times, as the spec's
-- fail_node does: every block goes, STORING or READY, read or not, and the copies
-- running on them end with it (their slots free at once, no orphan kept); the
-- copies a reset left running keep theirs, the epoch stays, the LRU queue empties,
-- and the subscriber learns of the loss at the next take_events.
--
-- The bounds below are TINY's (proofs/modelcheck/bounds.py); the runner
-- (proofs/modelcheck/rumur.py) rewrites this block for other presets, and sets
-- BACKGROUND for `--background-eviction` and NODE_FAILURE for `--node-failure`.

const
  CAPACITY: 2;
  NKEYS: 3;
  RESETS: 1;
  READERS: 1;
  BACKGROUND: false;
  NODE_FAILURE: false;

type
  key_t: scalarset(NKEYS);
  slot_t: scalarset(CAPACITY);
  phase_t: enum { ABSENT, STORING, READY };
  orphan_kind_t: enum { NONE, STORE_COPY, LOAD_COPY };
  epoch_t: 0..RESETS;
  readers_t: 0..READERS;
  pos_t: 0..NKEYS;  -- position in the LRU queue, 1 = least recent; 0 = not queued

  block_t: record
    phase: phase_t;
    slot: slot_t;       -- undefined when ABSENT
    readers: readers_t;
    pos: pos_t;
    announced: boolean; -- in the READY set a subscriber rebuilt from events
  end;

  orphan_t: record      -- a copy reset_cache left running in one epoch
    kind: orphan_kind_t;
    slot: slot_t;       -- undefined when NONE
    count: readers_t;   -- completions still due
  end;

var
  epoch: epoch_t;
  blocks: array [key_t] of block_t;
  orphans: array [key_t] of array [epoch_t] of orphan_t;

-- ----------------------------------------------------------------------------
-- queries

function slot_used(s: slot_t): boolean;
begin
  for k: key_t do
    if blocks[k].phase != ABSENT then
      if blocks[k].slot = s then return true; endif;
    endif;
    for e: epoch_t do
      if orphans[k][e].kind != NONE then
        if orphans[k][e].slot = s then return true; endif;
      endif;
    endfor;
  endfor;
  return false;
end;

function free_slots(): 0..CAPACITY;
var n: 0..CAPACITY;
begin
  n := 0;
  for s: slot_t do
    if !slot_used(s) then n := n + 1; endif;
  endfor;
  return n;
end;

function evictable(k: key_t): boolean;
begin
  return blocks[k].phase = READY & blocks[k].readers = 0;
end;

function evictable_count(): 0..NKEYS;
var n: 0..NKEYS;
begin
  n := 0;
  for k: key_t do
    if evictable(k) then n := n + 1; endif;
  endfor;
  return n;
end;

-- how many live blocks and running copies hold slot s (a check, not a rule input)
function holders(s: slot_t): 0..NKEYS * (RESETS + 2);
var n: 0..NKEYS * (RESETS + 2);
begin
  n := 0;
  for k: key_t do
    if blocks[k].phase != ABSENT then
      if blocks[k].slot = s then n := n + 1; endif;
    endif;
    for e: epoch_t do
      if orphans[k][e].kind != NONE then
        if orphans[k][e].slot = s then n := n + 1; endif;
      endif;
    endfor;
  endfor;
  return n;
end;

function queue_length(): pos_t;
var n: pos_t;
begin
  n := 0;
  for k: key_t do
    if blocks[k].pos != 0 then n := n + 1; endif;
  endfor;
  return n;
end;

function in_flight(): boolean;
begin
  for k: key_t do
    if blocks[k].phase = STORING | blocks[k].readers > 0 then return true; endif;
    for e: epoch_t do
      if orphans[k][e].kind != NONE then return true; endif;
    endfor;
  endfor;
  return false;
end;

-- ----------------------------------------------------------------------------
-- the LRU queue (vLLM 0.24): evictable keys, least recent first

procedure queue_remove(k: key_t);
var p: pos_t;
begin
  p := blocks[k].pos;
  if p != 0 then
    for j: key_t do
      if blocks[j].pos > p then blocks[j].pos := blocks[j].pos - 1; endif;
    endfor;
    blocks[k].pos := 0;
  endif;
end;

procedure queue_append(k: key_t);
begin
  queue_remove(k);
  blocks[k].pos := queue_length() + 1;
end;

procedure drop_block(k: key_t);
begin
  queue_remove(k);
  blocks[k].phase := ABSENT;
  undefine blocks[k].slot;
  blocks[k].readers := 0;
end;

-- ----------------------------------------------------------------------------
-- prepare_store: the keys not yet present get slots, evicting exactly as many
-- LRU victims (READY, no readers, not named in the call) as needed, or the whole
-- call is rejected and nothing changes

function is_candidate(k: key_t; k1: key_t; k2: key_t): boolean;
begin
  return evictable(k) & k != k1 & k != k2;
end;

procedure evict_one(k1: key_t; k2: key_t);
var victim: key_t; found: boolean;
begin
  found := false;
  for k: key_t do
    if is_candidate(k, k1, k2) then
      if !found then
        victim := k; found := true;
      elsif blocks[k].pos < blocks[victim].pos then
        victim := k;
      endif;
    endif;
  endfor;
  assert found "a victim exists";
  drop_block(victim);
end;

procedure start_store(k: key_t);
var done: boolean;
begin
  -- any free slot: the spec takes the lowest, and free slots are interchangeable
  -- (slot symmetry), so the first one this loop meets reaches the same classes
  done := false;
  for s: slot_t do
    if !done & !slot_used(s) then
      blocks[k].phase := STORING;
      blocks[k].slot := s;
      blocks[k].readers := 0;
      done := true;
    endif;
  endfor;
  assert done "a free slot exists";
end;

procedure prepare_store(k1: key_t; k2: key_t);  -- k1 = k2 for a one-key call
var fresh: 0..2; candidates: 0..NKEYS; needed: -CAPACITY..2;
begin
  fresh := 0;
  if blocks[k1].phase = ABSENT then fresh := fresh + 1; endif;
  if k2 != k1 & blocks[k2].phase = ABSENT then fresh := fresh + 1; endif;
  candidates := 0;
  for k: key_t do
    if is_candidate(k, k1, k2) then candidates := candidates + 1; endif;
  endfor;
  needed := fresh - free_slots();
  if needed <= candidates then
    while needed > 0 do
      evict_one(k1, k2);
      needed := needed - 1;
    endwhile;
    if blocks[k1].phase = ABSENT then start_store(k1); endif;
    if k2 != k1 & blocks[k2].phase = ABSENT then start_store(k2); endif;
  endif;
end;

-- prepare_load pins a READY key: one more reader; the first reader takes it out
-- of the LRU queue
procedure prepare_load(k: key_t);
begin
  queue_remove(k);
  blocks[k].readers := blocks[k].readers + 1;
end;

function loadable(k: key_t): boolean;
begin
  return blocks[k].phase = READY & blocks[k].readers < READERS;
end;

-- touch: walking the keys backwards, each queued key moves to the most recent end
procedure touch(k: key_t);
begin
  if blocks[k].pos != 0 then queue_append(k); endif;
end;

procedure release_orphan(k: key_t; e: epoch_t);
begin
  orphans[k][e].count := orphans[k][e].count - 1;
  if orphans[k][e].count = 0 then
    orphans[k][e].kind := NONE;
    undefine orphans[k][e].slot;
  endif;
end;

-- ----------------------------------------------------------------------------

startstate "empty tier"
begin
  epoch := 0;
  for k: key_t do
    blocks[k].phase := ABSENT;
    undefine blocks[k].slot;
    blocks[k].readers := 0;
    blocks[k].pos := 0;
    blocks[k].announced := false;
    for e: epoch_t do
      orphans[k][e].kind := NONE;
      undefine orphans[k][e].slot;
      orphans[k][e].count := 0;
    endfor;
  endfor;
end;

ruleset k1: key_t do
  rule "prepare_store([k1])"
    true ==> begin prepare_store(k1, k1); end;

  rule "prepare_load([k1])"
    loadable(k1) ==> begin prepare_load(k1); end;

  rule "touch([k1])"
    true ==> begin touch(k1); end;

  rule "evict_in_background([k1])"
    BACKGROUND & evictable(k1) ==> begin drop_block(k1); end;

  rule "complete_store([k1]) in the current epoch"
    blocks[k1].phase = STORING ==>
  begin
    blocks[k1].phase := READY;
    queue_append(k1);
  end;

  rule "complete_store([k1], success=False) in the current epoch"
    blocks[k1].phase = STORING ==> begin drop_block(k1); end;

  rule "complete_load([k1]) in the current epoch"
    blocks[k1].phase = READY & blocks[k1].readers > 0 ==>
  begin
    blocks[k1].readers := blocks[k1].readers - 1;
    if blocks[k1].readers = 0 then queue_append(k1); endif;
  end;

  ruleset e: epoch_t do
    rule "complete_store([k1], ticket=its job) of a copy a reset left running in epoch e"
      orphans[k1][e].kind = STORE_COPY ==> begin release_orphan(k1, e); end;

    rule "complete_load([k1], ticket=its job) of a copy a reset left running in epoch e"
      orphans[k1][e].kind = LOAD_COPY ==> begin release_orphan(k1, e); end;
  endruleset;

  ruleset k2: key_t do
    rule "prepare_store([k1, k2])"
      k1 != k2 ==> begin prepare_store(k1, k2); end;

    rule "prepare_load([k1, k2])"
      k1 != k2 & loadable(k1) & loadable(k2) ==>
    begin
      prepare_load(k1);
      prepare_load(k2);
    end;

    rule "touch([k1, k2])"
      k1 != k2 ==>
    begin
      touch(k2);
      touch(k1);
    end;
  endruleset;
endruleset;

rule "reset_cache()"
  epoch < RESETS ==>
begin
  for k: key_t do
    if blocks[k].phase = STORING then
      orphans[k][epoch].kind := STORE_COPY;
      orphans[k][epoch].slot := blocks[k].slot;
      orphans[k][epoch].count := 1;
    elsif blocks[k].readers > 0 then
      orphans[k][epoch].kind := LOAD_COPY;
      orphans[k][epoch].slot := blocks[k].slot;
      orphans[k][epoch].count := blocks[k].readers;
    endif;
    if blocks[k].phase != ABSENT then drop_block(k); endif;
  endfor;
  epoch := epoch + 1;
end;

rule "fail_node()"
  NODE_FAILURE ==>
begin
  for k: key_t do
    if blocks[k].phase != ABSENT then drop_block(k); endif;
  endfor;
end;

rule "take_events()"
  true ==>
begin
  for k: key_t do
    blocks[k].announced := blocks[k].phase = READY;
  endfor;
end;

-- ----------------------------------------------------------------------------
-- the spec's invariants (spec/kvoffload/spec/invariants.py) that the state
-- encoding does not already make true

invariant "readers_only_on_ready_blocks"
  forall k: key_t do blocks[k].readers > 0 -> blocks[k].phase = READY endforall;

invariant "no_shared_slots"
  forall s: slot_t do holders(s) <= 1 endforall;

invariant "orphans_are_past_copies"
  forall k: key_t do forall e: epoch_t do
    orphans[k][e].kind != NONE -> (e < epoch & orphans[k][e].count >= 1)
  endforall endforall;

invariant "lru_queues_evictable_blocks"
  forall k: key_t do
    ((blocks[k].pos != 0) = evictable(k))
    & forall j: key_t do (k != j & blocks[k].pos != 0) -> blocks[k].pos != blocks[j].pos endforall
    & blocks[k].pos <= queue_length()
  endforall;

invariant "quiescent_slots_reclaimable"
  !in_flight() -> free_slots() + evictable_count() = CAPACITY;

-- rumur's liveness: from every reachable state some state without a copy in
-- flight is reachable (by any calls; the Python checker asks more: by
-- completions alone)
liveness "quiescence_reachable"
  !in_flight();
