// Inserted into src/llama-kv-cache.cpp by scripts/llama_build.py (patch
// "kv-cells-by-position"); see the recipe's comment there for why.

// The cells for one sequence's tokens in a micro-batch: position p in cell p modulo the
// stream's size, when every one of those cells is free to take (empty, or holding a position
// the window has left behind, the same test find_slot applies). Then a cache's layout is a
// function of the positions it holds, whatever was read, cut, drafted or restored before: a
// restored window checkpoint (its cells saved in index order, so its positions wrap round)
// sits where a full prefill put the same tokens, and attention sums its cells in the same
// order. False (idxs left empty) where two tokens would share a cell or a cell is taken;
// find_slot then searches as upstream does.
static bool inglenook_cells_by_position(const llama_kv_cells & cells, const llama_ubatch & ubatch,
                                        uint32_t first, uint32_t n_tokens, uint32_t n_swa,
                                        llama_swa_type swa_type, std::vector<uint32_t> & idxs) {
    const uint32_t size = cells.size();
    if (n_tokens == 0 || n_tokens > size) {
        return false;
    }
    // positions one after another land in distinct cells (n_tokens <= size); others are checked
    bool consecutive = true;
    for (uint32_t i = 1; i < n_tokens && consecutive; ++i) {
        consecutive = ubatch.pos[first + i] == ubatch.pos[first] + (llama_pos) i;
    }
    std::vector<bool> taken;
    if (!consecutive) {
        taken.assign(size, false);
    }
    idxs.clear();
    for (uint32_t i = 0; i < n_tokens; ++i) {
        const llama_pos pos = ubatch.pos[first + i];
        const uint32_t idx = (uint32_t) ((uint64_t) pos % size);
        bool can_use = pos >= 0 && (consecutive || !taken[idx]);
        if (can_use && !cells.is_empty(idx)) {
            can_use = cells.seq_count(idx) == 1 &&
                llama_hparams::is_masked_swa(n_swa, swa_type, cells.pos_get(idx),
                                             cells.seq_pos_max(cells.seq_get(idx)) + 1);
        }
        if (!can_use) {
            idxs.clear();
            return false;
        }
        if (!consecutive) {
            taken[idx] = true;
        }
        idxs.push_back(idx);
    }
    return true;
}

