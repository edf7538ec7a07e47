// Speculative decoding (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative
// Decoding"; Chen et al. 2023, "Accelerating LLM Decoding with Speculative Sampling").
//
// A small draft model proposes d tokens one at a time; the target model scores all of them in
// one batched forward pass of d + 1 tokens; the longest acceptable prefix is kept plus one token
// from the target, and both KV caches roll back past the rejected tokens. With greedy sampling
// the output is the target's own greedy output; with temperature > 0 the acceptance rule keeps
// the target's sampling distribution exactly (not the same tokens as plain sampling: the random
// numbers are drawn differently). Each round's depth d comes from a DraftPolicy
// (runtime/draft_policy.h) fed with the acceptance seen so far and the measured wall time of
// draft steps and verify batches, or is fixed (SpeculativeParams::adaptive = false). Because the
// random numbers a round uses depend on its depth, a seed reproduces a sampled (temperature > 0)
// run only with a fixed depth; greedy output never depends on the depths.
//
// Why greedy output is identical to plain decoding, token for token: the target must give the
// same logits for a token whether it is evaluated alone (plain decode) or as row i of a d + 1 row
// verify batch. On the CPU backend (ops/cpu) every op is batch-invariant in that sense:
//   - matmuls with block-quantized or f16 weights convert each activation row on its own to the
//     weight's vec_dot type, then compute one vec_dot per (weight row, activation row) pair, with
//     the same code whatever the number of rows N (ops/cpu/k_matmul.cpp);
//   - attention walks, for each query row, its visible keys 0..pos in the same fixed order and
//     blocking whatever the number of query rows T (ops/cpu/k_attention.cpp);
//   - every other op (norms, RoPE, SwiGLU, get_rows, KV store) works row by row.
// The exception is F32 weights with contiguous operands: that matmul goes through Eigen's GEMM,
// whose blocking depends on N, so a model with F32 matmul weights is invariant only up to
// rounding and its speculative greedy output may (rarely) differ from plain greedy output. On
// CUDA the decode kernels are batch-invariant up to 8 rows per batch (MMVQ, the float matvec,
// split-KV attention): 9..64 rows run the tensor-core MMQ, whose rounding differs from MMVQ's.
// Each backend says how far it is invariant (Backend::batch_invariant_rows); the default maximum
// depth is that minus the one committed token a verify batch also holds, at most 7.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "runtime/draft_policy.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

struct SpeculativeParams {
  /// Max tokens drafted per round (--draft-max), >= 1; 0: default_draft_max(target backend).
  int32_t n_draft = 0;
  int32_t n_draft_min = 0;  ///< min tokens drafted per round (--draft-min), 0 (plain decoding allowed) .. n_draft
  bool adaptive = true;     ///< false: always draft n_draft tokens (fewer only near n_predict or n_ctx)
  /// A draft that fell behind (plain-decoding rounds) is fed at most this many of the newest
  /// committed tokens; older ones are skipped, leaving a hole in its context. Acceptance may drop
  /// a little; output does not change (the target decides). >= 0.
  int32_t catch_up_window = 32;
  /// Tuning of the adaptive policy; its d_min and d_max are replaced by n_draft_min and n_draft.
  DraftPolicyParams policy;
};

/// The default --draft-max on `target`: the deepest draft whose verify batch (draft + 1 rows) the
/// backend computes batch-invariantly, so greedy output stays that of plain decoding, capped at 7
/// (deeper drafts rarely pay at the acceptance rates seen; docs/perf speculative entries).
int32_t default_draft_max(const Backend& target);

/// Counters over every generate() call of one SpeculativeDecoder. A round is one target verify pass.
struct SpeculativeStats {
  int64_t n_rounds = 0;             ///< target verify passes (the first token, from the prefill, is not one)
  int64_t n_drafted = 0;            ///< tokens proposed by the draft
  int64_t n_accepted = 0;           ///< drafted tokens accepted
  std::vector<int64_t> depth_hist;  ///< depth_hist[d]: rounds that drafted d tokens
  double draft_ms = 0;              ///< wall time of draft steps
  double verify_ms = 0;             ///< wall time of verify passes

  /// accepted / drafted (0 when nothing was drafted).
  double acceptance_rate() const { return n_drafted ? static_cast<double>(n_accepted) / static_cast<double>(n_drafted) : 0; }
  /// Rounds that drafted at least one token (the others were plain decoding).
  int64_t drafting_rounds() const { return n_rounds - (depth_hist.empty() ? 0 : depth_hist[0]); }
  /// Accepted drafted tokens per drafting round (0 when no round drafted).
  double mean_accepted_length() const {
    const int64_t n = drafting_rounds();
    return n ? static_cast<double>(n_accepted) / static_cast<double>(n) : 0;
  }
  /// Tokens committed per target pass: (accepted + rounds) / rounds (the last round may commit
  /// fewer when a stop condition cuts it).
  double tokens_per_verify() const {
    return n_rounds ? static_cast<double>(n_accepted + n_rounds) / static_cast<double>(n_rounds) : 0;
  }
  /// Mean chosen depth: drafted / rounds.
  double mean_draft_depth() const { return n_rounds ? static_cast<double>(n_drafted) / static_cast<double>(n_rounds) : 0; }
};

/// The verdict on one draft: how many drafted tokens are accepted and the token that follows them.
struct DraftVerdict {
  int32_t n_accepted = 0;
  int32_t next = -1;
};

/// Speculative sampling's acceptance rule. p[i] (i = 0..d) are the target's distributions after
/// the accepted prefix of length i, q[i] (i = 0..d-1) the draft's distributions that `drafted[i]`
/// was drawn from. Token i is accepted with probability min(1, p[i][x] / q[i][x]); at the first
/// rejection the next token is drawn from normalize(max(0, p[i] - q[i])); when all d are accepted
/// it is drawn from p[d]. Random numbers come from `rng`. For one-hot (greedy) distributions this
/// accepts exactly the drafted tokens that equal the target's argmax. Throws
/// std::invalid_argument when the counts do not match (d drafted, d q's, d + 1 p's).
DraftVerdict verify_draft(std::span<const std::vector<float>> p, std::span<const std::vector<float>> q,
                          std::span<const int32_t> drafted, Sampler& rng);

/// Checks that a model with tokenizer `draft` can draft for one with tokenizer `target`: the same
/// number of tokens, the same text and type for every id, the same EOS id and the same
/// end-of-generation ids. Throws std::invalid_argument naming the first difference (for a text,
/// the id and both texts) and saying that the vocabularies differ.
void check_draft_vocab(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft);

class SpeculativeDecoder {
 public:
  /// `target` and `draft` must use the same vocabulary (same ids for the same tokens) and start
  /// empty or holding the same tokens. Only the vocabulary sizes can be compared here: prefer the
  /// overload with the tokenizers. Throws std::invalid_argument for bad params or different
  /// vocabulary sizes.
  SpeculativeDecoder(Session& target, Session& draft, const SpeculativeParams& p = {});
  /// Same, after check_draft_vocab(target_tok, draft_tok).
  SpeculativeDecoder(Session& target, const tokenizer::Tokenizer& target_tok, Session& draft,
                     const tokenizer::Tokenizer& draft_tok, const SpeculativeParams& p = {});

  /// Like generate(): evaluates the prompt on both models, then decodes speculatively. `tok` is
  /// the target's tokenizer. Throws ContextFullError when the prompt alone does not fit.
  GenerateResult generate(const tokenizer::Tokenizer& tok, Sampler& sampler, std::span<const int32_t> prompt,
                          const GenerateParams& params, const std::function<void(std::string_view)>& on_text = nullptr);

  const SpeculativeStats& stats() const { return stats_; }
  const SpeculativeParams& params() const { return params_; }
  /// The depth policy with what it has measured (fed in fixed mode too).
  const DraftPolicy& policy() const { return policy_; }

 private:
  Session& target_;
  Session& draft_;
  SpeculativeParams params_;
  DraftPolicy policy_;
  SpeculativeStats stats_;
};

}  // namespace minfer
