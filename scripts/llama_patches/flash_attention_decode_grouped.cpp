// Inserted into ggml/src/ggml-cpu/ops.cpp by scripts/llama_build.py (patch
// "flash-attention-decode-grouped-heads"); see the recipe's comment there for why.

// Asks for a cache row a block ahead of its use. The cells are read in blocks, each block's
// K and V rows once per KV head, a pattern the hardware prefetcher does not follow (without
// this the loads of V rows were most of the kernel's time). Into L2, not L1: a block for all
// heads (SmolLM2: 64 cells x 768 bytes) is more than L1 holds beside the block in use.
static inline void fa_decode_prefetch(const char * row, size_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
    for (size_t off = 0; off < bytes; off += 64) {
        __builtin_prefetch(row + off, 0, 2);
    }
#else
    GGML_UNUSED(row); GGML_UNUSED(bytes);
#endif
}

// One f16 K row's dot product with each head's query (queries: heads x DK, f32 holding the
// f16-rounded values the row-at-a-time path multiplies), the row widened once for all the
// heads: scores[r*stride] = K . q_r. False where this CPU has no such path or DK does not fit
// it; the caller then takes the type's own dot product per head.
static inline bool fa_decode_dot_f16_row(int64_t DK, int64_t heads, const ggml_fp16_t * row,
                                         const float * queries, float * scores, int64_t stride) {
#if defined(__AVX512F__)
    if (DK % 16 != 0 || DK > 512) {
        return false;
    }
    __m512 k[32];
    for (int64_t d = 0; d < DK; d += 16) {
        k[d/16] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (row + d)));
    }
    if (DK <= 64) {
        // up to four vectors: one chain (measured faster here than four sums for SmolLM2's 64)
        for (int64_t r = 0; r < heads; ++r) {
            const float * q = queries + r*DK;
            __m512 acc = _mm512_mul_ps(k[0], _mm512_loadu_ps(q));
            for (int64_t d = 16; d < DK; d += 16) {
                acc = _mm512_fmadd_ps(k[d/16], _mm512_loadu_ps(q + d), acc);
            }
            scores[r*stride] = _mm512_reduce_add_ps(acc);
        }
        return true;
    }
    // longer rows (gemma-3: 256 dimensions): four sums in turn, not one chain of products
    for (int64_t r = 0; r < heads; ++r) {
        const float * q = queries + r*DK;
        __m512 a0 = _mm512_setzero_ps();
        __m512 a1 = _mm512_setzero_ps();
        __m512 a2 = _mm512_setzero_ps();
        __m512 a3 = _mm512_setzero_ps();
        int64_t d = 0;
        for (; d + 64 <= DK; d += 64) {
            a0 = _mm512_fmadd_ps(k[d/16 + 0], _mm512_loadu_ps(q + d +  0), a0);
            a1 = _mm512_fmadd_ps(k[d/16 + 1], _mm512_loadu_ps(q + d + 16), a1);
            a2 = _mm512_fmadd_ps(k[d/16 + 2], _mm512_loadu_ps(q + d + 32), a2);
            a3 = _mm512_fmadd_ps(k[d/16 + 3], _mm512_loadu_ps(q + d + 48), a3);
        }
        for (; d < DK; d += 16) {
            a0 = _mm512_fmadd_ps(k[d/16], _mm512_loadu_ps(q + d), a0);
        }
        scores[r*stride] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
    return true;
#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    if (DK % 8 != 0 || DK > 512) {
        return false;
    }
    __m256 k[64];
    for (int64_t d = 0; d < DK; d += 8) {
        k[d/8] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (row + d)));
    }
    for (int64_t r = 0; r < heads; ++r) {
        const float * q = queries + r*DK;
        __m256 a0 = _mm256_setzero_ps();
        __m256 a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps();
        __m256 a3 = _mm256_setzero_ps();
        int64_t d = 0;
        for (; d + 32 <= DK; d += 32) {
            a0 = _mm256_fmadd_ps(k[d/8 + 0], _mm256_loadu_ps(q + d +  0), a0);
            a1 = _mm256_fmadd_ps(k[d/8 + 1], _mm256_loadu_ps(q + d +  8), a1);
            a2 = _mm256_fmadd_ps(k[d/8 + 2], _mm256_loadu_ps(q + d + 16), a2);
            a3 = _mm256_fmadd_ps(k[d/8 + 3], _mm256_loadu_ps(q + d + 24), a3);
        }
        for (; d < DK; d += 8) {
            a0 = _mm256_fmadd_ps(k[d/8], _mm256_loadu_ps(q + d), a0);
        }
        const __m256 acc = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
        __m128 sum = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
        sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
        scores[r*stride] = _mm_cvtss_f32(sum);
    }
    return true;
#else
    GGML_UNUSED(DK); GGML_UNUSED(heads); GGML_UNUSED(row); GGML_UNUSED(queries); GGML_UNUSED(scores); GGML_UNUSED(stride);
    return false;
#endif
}

// Adds one f16 V row, times each head's weight (weights[r*stride]), to each head's f32 sum
// (sums + r*DV), widening the row in registers once for all the heads. False where this
// CPU has no such path or DV does not fit it; the caller then widens the row into memory.
static inline bool fa_decode_add_f16_row(int64_t DV, int64_t heads, const ggml_fp16_t * row,
                                         const float * weights, int64_t stride, float * sums) {
#if defined(__AVX512F__)
    if (DV % 16 != 0) {
        return false;
    }
    for (int64_t d = 0; d < DV; d += 16) {
        const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (row + d)));
        for (int64_t r = 0; r < heads; ++r) {
            float * acc = sums + r*DV + d;
            _mm512_storeu_ps(acc, _mm512_fmadd_ps(x, _mm512_set1_ps(weights[r*stride]), _mm512_loadu_ps(acc)));
        }
    }
    return true;
#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    if (DV % 8 != 0) {
        return false;
    }
    for (int64_t d = 0; d < DV; d += 8) {
        const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (row + d)));
        for (int64_t r = 0; r < heads; ++r) {
            float * acc = sums + r*DV + d;
            _mm256_storeu_ps(acc, _mm256_fmadd_ps(x, _mm256_set1_ps(weights[r*stride]), _mm256_loadu_ps(acc)));
        }
    }
    return true;
#else
    GGML_UNUSED(DV); GGML_UNUSED(heads); GGML_UNUSED(row); GGML_UNUSED(weights); GGML_UNUSED(stride); GGML_UNUSED(sums);
    return false;
#endif
}

// One query row (a decode step) over this thread's share of the cache, for every head: the
// 64-cell blocks b with b % nth == ith, in order. Blocks go round the threads by index, not
// in one range per thread, so cells past the last one in use (fully masked: identity in
// every sum) move no block to another thread or range, and a cache whose used cells sit in
// the same places gives the same sums however many cells it spans (kv-cells-by-position).
// The cache stores each cell's K (and V) for all KV heads side by side, so the cells are
// taken in blocks of 64 and each block serves every head before the next is read: every
// row is fetched from memory once. Within a block the query heads that share a KV head go
// together (each K and V row widened once for the group), the block's scores are taken
// first, then one vectorised softmax step, and V is summed in f32. Writes the partials
// (M, S, V sum) the split-KV reduction expects, one per head.
static void ggml_compute_forward_flash_attn_ext_f16_decode_grouped(
        const ggml_compute_params * params,
        ggml_tensor * dst,
        float * partials, int64_t partial_stride) {

    const ggml_tensor * q     = dst->src[0];
    const ggml_tensor * k     = dst->src[1];
    const ggml_tensor * v     = dst->src[2];
    const ggml_tensor * mask  = dst->src[3];
    const ggml_tensor * sinks = dst->src[4];

    GGML_TENSOR_LOCALS(int64_t, neq, q,   ne)
    GGML_TENSOR_LOCALS(size_t,  nbq, q,   nb)
    GGML_TENSOR_LOCALS(int64_t, nek, k,   ne)
    GGML_TENSOR_LOCALS(size_t,  nbk, k,   nb)
    GGML_TENSOR_LOCALS(int64_t, nev, v,   ne)
    GGML_TENSOR_LOCALS(size_t,  nbv, v,   nb)

    const int64_t DK = nek0;
    const int64_t DV = nev0;
    const int64_t n_heads = neq2;
    const int64_t heads_per_kv = neq2/nek2;

    float scale         = 1.0f;
    float max_bias      = 0.0f;
    float logit_softcap = 0.0f;

    memcpy(&scale,         (float *) dst->op_params + 0, sizeof(float));
    memcpy(&max_bias,      (float *) dst->op_params + 1, sizeof(float));
    memcpy(&logit_softcap, (float *) dst->op_params + 2, sizeof(float));

    if (logit_softcap != 0) {
        scale /= logit_softcap;
    }

    const uint32_t n_head_log2 = 1u << (uint32_t) floor(log2(n_heads));

    const float m0 = powf(2.0f, -(max_bias       ) / n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);

    ggml_type         const k_vec_dot_type = ggml_get_type_traits_cpu(k->type)->vec_dot_type;
    ggml_from_float_t const q_to_vec_dot   = ggml_get_type_traits_cpu(k_vec_dot_type)->from_float;
    ggml_vec_dot_t    const kq_vec_dot     = ggml_get_type_traits_cpu(k->type)->vec_dot;

    constexpr int64_t BLOCK = 64;
    const int64_t ith  = params->ith;
    const int64_t step = params->nth*BLOCK;  // from one of this thread's blocks to its next
    const size_t k_row_bytes = ggml_row_size(k->type, DK);
    const size_t v_row_bytes = ggml_row_size(v->type, DV);

    // Per head: its query as the dot product wants it and widened to f32, its running maximum,
    // sum and slope, and its f32 V sum; per head of one group: a block's scores and weights;
    // then one widened V row.
    const int64_t q_floats = (int64_t) ((ggml_row_size(k_vec_dot_type, DK) + sizeof(float) - 1)/sizeof(float));
    thread_local std::vector<float> scratch;
    thread_local std::vector<const ggml_fp16_t *> mask_rows;
    const size_t needed = (size_t) (n_heads*(q_floats + DK + 3 + DV) + heads_per_kv*2*BLOCK + DV);
    if (scratch.size() < needed) {
        scratch.resize(needed);
    }
    if (mask_rows.size() < (size_t) n_heads) {
        mask_rows.resize(n_heads);
    }
    float * Q_q    = scratch.data();
    float * Q_f32  = Q_q + n_heads*q_floats;
    float * M      = Q_f32 + n_heads*DK;
    float * S      = M + n_heads;
    float * slopes = S + n_heads;
    float * VKQ    = slopes + n_heads;
    float * scores = VKQ + n_heads*DV;
    float * probs  = scores + heads_per_kv*BLOCK;
    float * V32    = probs + heads_per_kv*BLOCK;
    const ggml_fp16_t ** masks = mask_rows.data();

    for (int64_t h = 0; h < n_heads; ++h) {
        slopes[h] = (max_bias > 0.0f) ? h < n_head_log2 ? powf(m0, h + 1) : powf(m1, 2*(h - n_head_log2) + 1) : 1.0f;
        masks[h]  = mask ? (const ggml_fp16_t *)((const char *) mask->data + (h%mask->ne[2])*mask->nb[2]) : NULL;
        M[h] = -INFINITY;
        S[h] = 0.0f;
        memset(VKQ + h*DV, 0, DV*sizeof(float));
        const float * pq = (const float *) ((const char *) q->data + h*nbq2);
        q_to_vec_dot(pq, Q_q + h*q_floats, DK);
        if (k->type == GGML_TYPE_F16) {
            const ggml_fp16_t * q16 = (const ggml_fp16_t *) (Q_q + h*q_floats);
            for (int64_t d = 0; d < DK; ++d) {
                Q_f32[h*DK + d] = GGML_CPU_FP16_TO_FP32(q16[d]);
            }
        }
    }

    for (int64_t ic0 = ith*BLOCK; ic0 < nek1; ic0 += step) {
        const int64_t n_block = MIN(BLOCK, nek1 - ic0);

        for (int64_t ik2 = 0; ik2 < nek2; ++ik2) {
            const int64_t h0 = ik2*heads_per_kv;

            for (int64_t i = 0; i < n_block; ++i) {
                const int64_t ic = ic0 + i;
                if (ik2 == 0 && ic + step < nek1) {
                    for (int64_t jk2 = 0; jk2 < nek2; ++jk2) {
                        fa_decode_prefetch((const char *) k->data + (ic + step)*nbk1 + jk2*nbk2, k_row_bytes);
                        fa_decode_prefetch((const char *) v->data + (ic + step)*nbv1 + jk2*nbv2, v_row_bytes);
                    }
                }
                // every head of the group masked: no dot product to take
                bool all_masked = masks[h0] != NULL;
                for (int64_t r = 0; r < heads_per_kv && all_masked; ++r) {
                    all_masked = GGML_CPU_FP16_TO_FP32(masks[h0 + r][ic]) == -INFINITY;
                }
                if (all_masked) {
                    for (int64_t r = 0; r < heads_per_kv; ++r) {
                        scores[r*BLOCK + i] = -INFINITY;
                    }
                    continue;
                }
                const char * k_data = (const char *) k->data + ic*nbk1 + ik2*nbk2;
                const bool dotted = k->type == GGML_TYPE_F16 &&
                    fa_decode_dot_f16_row(DK, heads_per_kv, (const ggml_fp16_t *) k_data, Q_f32 + h0*DK, scores + i, BLOCK);
                for (int64_t r = 0; r < heads_per_kv; ++r) {
                    const int64_t h = h0 + r;
                    const float mv = masks[h] ? slopes[h]*GGML_CPU_FP16_TO_FP32(masks[h][ic]) : 0.0f;
                    if (mv == -INFINITY) {
                        scores[r*BLOCK + i] = -INFINITY;
                        continue;
                    }
                    float s = scores[r*BLOCK + i];
                    if (!dotted) {
                        kq_vec_dot(DK, &s, 0, k_data, 0, Q_q + h*q_floats, 0, 1);
                    }
                    s = s*scale;
                    if (logit_softcap != 0.0f) {
                        s = logit_softcap*tanhf(s);
                    }
                    scores[r*BLOCK + i] = s + mv;
                }
            }

            bool any = false;
            for (int64_t r = 0; r < heads_per_kv; ++r) {
                const int64_t h = h0 + r;
                float * sc = scores + r*BLOCK;
                float * p  = probs  + r*BLOCK;
                float block_max = -INFINITY;
                for (int64_t i = 0; i < n_block; ++i) {
                    block_max = MAX(block_max, sc[i]);
                }
                if (block_max == -INFINITY) {
                    memset(p, 0, n_block*sizeof(float));
                    continue;
                }
                any = true;
                if (block_max > M[h]) {
                    const float ms = expf(M[h] - block_max);
                    ggml_vec_scale_f32((int) DV, VKQ + h*DV, ms);
                    S[h] *= ms;
                    M[h] = block_max;
                }
                S[h] += (float) ggml_vec_soft_max_f32((int) n_block, p, sc, M[h]);
            }
            if (!any) {
                continue;
            }

            for (int64_t i = 0; i < n_block; ++i) {
                const char * v_data = (const char *) v->data + (ic0 + i)*nbv1 + ik2*nbv2;
                if (v->type == GGML_TYPE_F16 && fa_decode_add_f16_row(DV, heads_per_kv, (const ggml_fp16_t *) v_data,
                                                                      probs + i, BLOCK, VKQ + h0*DV)) {
                    continue;
                }
                const float * v_row;
                if (v->type == GGML_TYPE_F16) {
                    ggml_cpu_fp16_to_fp32((const ggml_fp16_t *) v_data, V32, DV);
                    v_row = V32;
                } else {
                    v_row = (const float *) v_data;
                }
                for (int64_t r = 0; r < heads_per_kv; ++r) {
                    const float w = probs[r*BLOCK + i];
                    if (w != 0.0f) {
                        ggml_vec_mad_f32((int) DV, VKQ + (h0 + r)*DV, v_row, w);
                    }
                }
            }
        }
    }

    for (int64_t h = 0; h < n_heads; ++h) {
        float * acc = VKQ + h*DV;
        // sinks: once, on the thread that holds the first block (the first chunk upstream)
        if (sinks && ith == 0) {
            const float s = ((const float *) sinks->data)[h];
            float ms = 1.0f;
            float vs = 1.0f;
            if (s > M[h]) {
                ms = expf(M[h] - s);
                M[h] = s;
                ggml_vec_scale_f32((int) DV, acc, ms);
            } else {
                vs = expf(s - M[h]);
            }
            S[h] = S[h]*ms + vs;
        }
        float * partial = partials + h*partial_stride;
        partial[0] = M[h];
        partial[1] = S[h];
        memcpy(partial + 2, acc, DV*sizeof(float));
    }
    GGML_UNUSED(nbk3);
    GGML_UNUSED(nbv3);
}

