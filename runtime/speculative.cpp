#include "runtime/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <bit>
#include <chrono>
#include <stdexcept>
#include <string>

#include "runtime/token_sink.h"

namespace minfer {

DraftVerdict verify_draft(std::span<const std::vector<float>> p, std::span<const std::vector<float>> q,
                          std::span<const int32_t> drafted, Sampler& rng) {
  const size_t d = drafted.size();
  if (q.size() != d || p.size() != d + 1)
    throw std::invalid_argument(fmt::format("verify_draft: {} drafted tokens need {} draft and {} target distributions, "
                                            "got {} and {}", d, d, d + 1, q.size(), p.size()));
  DraftVerdict v;
  for (size_t i = 0; i < d; ++i) {
    const int32_t x = drafted[i];
    const float px = p[i][static_cast<size_t>(x)], qx = q[i][static_cast<size_t>(x)];
    // qx > 0 because x was drawn from q; a ratio >= 1 accepts without a draw.
    const bool accept = px >= qx || (qx > 0 && rng.uniform() < static_cast<double>(px) / static_cast<double>(qx));
    if (accept) {
      ++v.n_accepted;
      continue;
    }
    std::vector<float> residual(p[i].size());
    double sum = 0;
    for (size_t t = 0; t < residual.size(); ++t) {
      residual[t] = std::max(0.0f, p[i][t] - q[i][t]);
      sum += residual[t];
    }
    // p == q up to rounding leaves no mass: fall back to p itself.
    v.next = sum > 0 ? rng.sample_probs(residual) : rng.sample_probs(p[i]);
    return v;
  }
  v.next = rng.sample_probs(p[d]);
  return v;
}

namespace {

// llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE: vocabularies padded to different sizes (Qwen2.5-7B
// has 152064 entries, 0.5B 151936) still pair when the shared ids agree.
constexpr int32_t kMaxVocabSizeDifference = 128;

constexpr size_t kCatchUpChunk = 16;  // the draft's catch-up batch (see generate())

constexpr int32_t kDraftMaxCap = 7;

// n_draft 0 made concrete for the target.
SpeculativeParams resolved(SpeculativeParams p, const Session& target) {
  if (p.n_draft == 0) p.n_draft = default_draft_max(target.backend());
  return p;
}

DraftPolicyParams policy_params(const SpeculativeParams& p) {
  if (p.catch_up_window < 0)
    throw std::invalid_argument(fmt::format("speculative: catch_up_window ({}) must be >= 0", p.catch_up_window));
  if (p.n_draft < 1 || p.n_draft_min < 0 || p.n_draft_min > p.n_draft)
    throw std::invalid_argument(
        fmt::format("speculative: need 0 <= n_draft_min ({}) <= n_draft ({}) and n_draft >= 1", p.n_draft_min, p.n_draft));
  DraftPolicyParams pp = p.policy;
  pp.d_min = p.n_draft_min;
  pp.d_max = p.n_draft;
  return pp;
}

std::string quoted(const std::string& s) { return fmt::format("{:?}", s); }

}  // namespace

void check_draft_vocab(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft) {
  constexpr const char* kWhy = "speculative decoding needs the draft to use the target's vocabulary";
  if (std::abs(target.n_vocab() - draft.n_vocab()) > kMaxVocabSizeDifference)
    throw std::invalid_argument(fmt::format("the draft vocabulary ({} tokens) differs from the target vocabulary ({} tokens) by "
                                            "more than {} padding entries: {}", draft.n_vocab(), target.n_vocab(),
                                            kMaxVocabSizeDifference, kWhy));
  for (int32_t id = 0; id < std::min(target.n_vocab(), draft.n_vocab()); ++id) {
    const std::string &a = target.token_text(id), &b = draft.token_text(id);
    if (a != b)
      throw std::invalid_argument(fmt::format("the draft vocabulary differs from the target vocabulary at token id {}: {} in the "
                                              "target, {} in the draft ({})", id, quoted(a), quoted(b), kWhy));
    if (target.token_type(id) != draft.token_type(id))
      throw std::invalid_argument(fmt::format("the draft vocabulary differs from the target vocabulary at token id {} ({}): "
                                              "type {} in the target, {} in the draft ({})", id, quoted(a),
                                              tokenizer::token_type_name(target.token_type(id)),
                                              tokenizer::token_type_name(draft.token_type(id)), kWhy));
  }
  if (target.eos_id() != draft.eos_id())
    throw std::invalid_argument(fmt::format("the draft vocabulary differs from the target vocabulary: end-of-sequence id {} in "
                                            "the target, {} in the draft ({})", target.eos_id(), draft.eos_id(), kWhy));
  auto sorted = [](std::vector<int32_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto ea = sorted(target.eog_ids()), eb = sorted(draft.eog_ids());
  if (ea != eb)
    throw std::invalid_argument(fmt::format("the draft vocabulary differs from the target vocabulary: end-of-generation ids "
                                            "[{}] in the target, [{}] in the draft ({})",
                                            fmt::join(ea, ", "), fmt::join(eb, ", "), kWhy));
}

int32_t default_draft_max(const Backend& target) {
  const int64_t rows = target.batch_invariant_rows();
  return static_cast<int32_t>(std::clamp<int64_t>(rows - 1, 1, kDraftMaxCap));
}

SpeculativeDecoder::SpeculativeDecoder(Session& target, Session& draft, const SpeculativeParams& p)
    : target_(target), draft_(draft), params_(resolved(p, target)), policy_(policy_params(params_)) {
  if (std::abs(target.n_vocab() - draft.n_vocab()) > kMaxVocabSizeDifference)
    throw std::invalid_argument(fmt::format("speculative: the target vocabulary ({} tokens) and the draft vocabulary ({} "
                                            "tokens) differ by more than {}", target.n_vocab(), draft.n_vocab(),
                                            kMaxVocabSizeDifference));
}

SpeculativeDecoder::SpeculativeDecoder(Session& target, const tokenizer::Tokenizer& target_tok, Session& draft,
                                       const tokenizer::Tokenizer& draft_tok, const SpeculativeParams& p)
    : SpeculativeDecoder((check_draft_vocab(target_tok, draft_tok), target), draft, p) {}

GenerateResult SpeculativeDecoder::generate(const tokenizer::Tokenizer& tok, Sampler& sampler,
                                            std::span<const int32_t> prompt, const GenerateParams& params,
                                            const std::function<void(std::string_view)>& on_text) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  GenerateResult r;
  r.prompt_ids.assign(prompt.begin(), prompt.end());
  if (prompt.empty()) throw std::invalid_argument("speculative: empty prompt");
  for (int32_t t : prompt) sampler.accept(t);

  const auto t0 = Clock::now();
  std::vector<float> last_logits;
  {
    auto l = target_.eval(prompt);
    last_logits.assign(l.begin(), l.end());
  }
  // The draft holds everything but the newest committed token (`last`), which opens each draft
  // round; committed tokens it has not evaluated yet wait in draft_pending.
  draft_.eval(prompt);
  std::vector<int32_t> draft_pending;
  int32_t draft_gap = 0;  // committed tokens the draft never saw (see the catch-up below)
  r.n_prompt_eval = static_cast<int32_t>(prompt.size());
  r.prefill_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  const auto t1 = Clock::now();
  TokenSink sink(tok, sampler, params, r, on_text);
  const int32_t limit = params.n_predict < 0 ? INT32_MAX : params.n_predict;
  const auto hist_size = static_cast<size_t>(params_.n_draft) + 1;
  if (stats_.depth_hist.size() < hist_size) stats_.depth_hist.resize(hist_size, 0);  // d <= n_draft
  const bool greedy = sampler.greedy();
  const int32_t n_vocab_t = target_.n_vocab(), n_vocab_d = draft_.n_vocab();
  // The first token comes from the prompt's logits, as in plain decoding.
  int32_t last = -1;
  bool go = false;
  if (params.n_predict == 0) {
    r.stop_reason = "length";  // prefill only, as llama.cpp's -n 0
  } else {
    last = sampler.sample(last_logits);
    go = sink.push(last);
  }
  while (go) {
    // The target evaluates last + d drafted tokens; the draft its pending tokens + last + d - 1.
    const int32_t room_t = target_.n_ctx() - target_.n_past();
    const int32_t room_d = draft_.n_ctx() - draft_.n_past() - static_cast<int32_t>(draft_pending.size());
    if (room_t < 1) {
      r.stop_reason = "context";
      break;
    }
    const int32_t remaining = limit - static_cast<int32_t>(r.ids.size());
    const int32_t want = params_.adaptive ? policy_.choose() : params_.n_draft;
    // A committed id past the draft's vocabulary (a padding entry only the target has) cannot
    // open a draft round.
    int32_t d = last < n_vocab_d ? std::max(0, std::min({want, room_t - 1, room_d, remaining - 1})) : 0;
    if (d == 0) {
      // Plain decoding: one target pass and the sampler's own draw (the distribution verify_draft
      // would draw from, without building it). The draft catches up on its next round.
      draft_pending.push_back(last);
      const auto tv = Clock::now();
      const int32_t one[1] = {last};
      const int32_t next = sampler.sample(target_.eval(one));
      const double dtv = seconds_since(tv);
      stats_.verify_ms += dtv * 1e3;
      policy_.observe_verify(1, dtv);
      ++stats_.n_rounds;
      ++stats_.depth_hist[0];
      go = sink.push(next);
      last = next;
      continue;
    }
    // Draft d tokens, keeping each distribution (under the penalties of the tokens before it).
    std::vector<int32_t> drafted;
    std::vector<std::vector<float>> q;
    // The draft draws from its own stream: drawing with a copy of `sampler` would replay the
    // very uniforms verify_draft then tests acceptance with, which biases the output.
    Sampler dsamp = sampler.fork();
    {
      // After plain-decoding rounds the draft is behind by many tokens. It catches up in chunks of
      // kCatchUpChunk tokens, then power-of-two remainders: a Session keeps one graph per shape,
      // so these five shapes are built (and on CUDA captured) once and replayed by every later
      // catch-up, where one batch of the whole backlog would be a new shape (a graph build and an
      // uncaptured run, ~2 ms on the H200) at every probe.
      // Only the newest catch_up_window tokens are fed: after a long plain-decoding stretch the
      // draft continues with a hole in its context (its positions then trail the target's by
      // draft_gap). Output never depends on the draft, only acceptance does, and a small draft
      // predicts from the recent tokens anyway; a full catch-up would cost draft prefill for
      // every skipped token at every probe.
      const auto window = static_cast<size_t>(params_.catch_up_window);
      // Ids the draft does not have (target-only padding entries) become holes as well.
      size_t drop = draft_pending.size() > window ? draft_pending.size() - window : 0;
      for (size_t i = drop; i < draft_pending.size(); ++i)
        if (draft_pending[i] >= n_vocab_d) drop = i + 1;
      draft_gap += static_cast<int32_t>(drop);
      draft_pending.erase(draft_pending.begin(), draft_pending.begin() + static_cast<std::ptrdiff_t>(drop));
      if (draft_pending.size() > 1) {
        const auto tc = Clock::now();
        std::span<const int32_t> rest(draft_pending);
        while (!rest.empty()) {
          const size_t n = std::min(kCatchUpChunk, std::bit_floor(rest.size()));
          draft_.eval(rest.first(n));
          rest = rest.subspan(n);
        }
        stats_.draft_ms += seconds_since(tc) * 1e3;
        draft_pending.clear();
      }
      std::vector<int32_t> in = draft_pending;
      in.push_back(last);
      draft_pending.clear();
      for (int32_t i = 0; i < d; ++i) {
        const auto ts = Clock::now();
        auto l = draft_.eval(in);
        // Greedy needs no distributions: one-hot rows make verify_draft an argmax comparison,
        // done below without building vocabulary-sized vectors (152k floats a row on Qwen).
        int32_t x;
        if (greedy) {
          x = dsamp.sample(l);
        } else {
          q.push_back(dsamp.probs(l));
          x = dsamp.sample_probs(q.back());
        }
        const double dt = seconds_since(ts);
        stats_.draft_ms += dt * 1e3;
        policy_.observe_draft_step(dt);
        if (x >= n_vocab_t) {  // a draft-only padding id: the target would reject it; stop here
          if (!greedy) q.pop_back();
          break;
        }
        dsamp.accept(x);
        drafted.push_back(x);
        in.assign(1, x);
      }
      d = static_cast<int32_t>(drafted.size());
    }
    // Verify: one target pass over last + drafted, logits for every row.
    std::vector<int32_t> batch{last};
    batch.insert(batch.end(), drafted.begin(), drafted.end());
    const int32_t committed = target_.n_past() + 1;  // tokens committed before this round, last included
    const auto tv = Clock::now();
    auto tl = target_.eval(batch, /*all_logits=*/true);
    Sampler tsamp = sampler;
    const size_t nv = static_cast<size_t>(target_.n_vocab());
    auto row = [&](int32_t i) { return std::span<const float>(tl.data() + static_cast<size_t>(i) * nv, nv); };
    DraftVerdict v;
    std::vector<std::vector<float>> p;
    if (greedy) {
      // verify_draft on one-hot rows: accept while the draft equals the target's argmax.
      while (v.n_accepted < d && tsamp.sample(row(v.n_accepted)) == drafted[static_cast<size_t>(v.n_accepted)])
        tsamp.accept(drafted[static_cast<size_t>(v.n_accepted++)]);
      v.next = tsamp.sample(row(v.n_accepted));
    } else {
      for (int32_t i = 0; i <= d; ++i) {
        p.push_back(tsamp.probs(row(i)));
        if (i < d) tsamp.accept(drafted[static_cast<size_t>(i)]);
      }
    }
    const double dtv = seconds_since(tv);
    stats_.verify_ms += dtv * 1e3;
    policy_.observe_verify(d + 1, dtv);
    if (!greedy) {
      // Vocabularies may differ by padding entries: the missing ones have probability 0.
      const size_t n_max = static_cast<size_t>(std::max(n_vocab_t, n_vocab_d));
      for (auto& x : p) x.resize(n_max, 0.0f);
      for (auto& x : q) x.resize(n_max, 0.0f);
      v = verify_draft(p, q, drafted, sampler);
    }
    policy_.observe_verdict(d, v.n_accepted);
    ++stats_.n_rounds;
    stats_.n_drafted += d;
    stats_.n_accepted += v.n_accepted;
    ++stats_.depth_hist[static_cast<size_t>(d)];
    // The target keeps last + the accepted tokens; the draft keeps what it evaluated of them
    // (all but the last drafted token) and queues the rest.
    target_.rollback(committed + v.n_accepted);
    const int32_t keep = std::max(0, std::min(v.n_accepted, d - 1));
    draft_.rollback(committed - draft_gap + keep);
    draft_pending.assign(drafted.begin() + keep, drafted.begin() + v.n_accepted);
    // The draft holds the target's tokens but the skipped and the pending ones: cheap to check,
    // and a mistake here would only show as lower acceptance, never in the output.
    if (draft_.n_past() + draft_gap + static_cast<int32_t>(draft_pending.size()) != target_.n_past())
      throw std::logic_error(fmt::format("speculative: draft at {} + {} skipped + {} pending != target at {}",
                                         draft_.n_past(), draft_gap, draft_pending.size(), target_.n_past()));
    for (int32_t i = 0; i < v.n_accepted && go; ++i) go = sink.push(drafted[static_cast<size_t>(i)]);
    if (go) go = sink.push(v.next);
    last = v.next;
  }
  sink.finish();
  r.decode_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  return r;
}

}  // namespace minfer
