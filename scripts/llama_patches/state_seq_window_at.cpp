// Inserted into src/llama-kv-cache.cpp by scripts/llama_build.py (patch
// "state-seq-window-at"); see the recipe's comment there for why.

// Where a sequence's state copy ends, for this thread: -1 (upstream: at the sequence's last
// position), or a position p, and then the copy holds the cells a copy taken when the
// sequence ended at p would hold: positions before p, the window measured from p - 1.
static thread_local llama_pos inglenook_state_seq_end = -1;

extern "C" LLAMA_API void inglenook_state_seq_end_at(llama_pos end);  // for the engine (ctypes)

extern "C" LLAMA_API void inglenook_state_seq_end_at(llama_pos end) {
    inglenook_state_seq_end = end;
}

static bool inglenook_state_cell_kept(const llama_kv_cells & cells, uint32_t i, llama_seq_id seq_id) {
    return seq_id == -1 || inglenook_state_seq_end < 0 || cells.pos_get(i) < inglenook_state_seq_end;
}

static llama_pos inglenook_state_last_pos(const llama_kv_cells & cells, llama_seq_id seq_id) {
    const llama_pos last = cells.seq_pos_max(seq_id);
    return inglenook_state_seq_end < 0 ? last : std::min(last, inglenook_state_seq_end - 1);
}

