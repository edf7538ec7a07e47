#include "runtime/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

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

SpeculativeDecoder::SpeculativeDecoder(Session& target, Session& draft, const SpeculativeParams& p)
    : target_(target), draft_(draft), params_(p) {
  if (p.n_draft < 1 || p.n_draft_min < 1 || p.n_draft_min > p.n_draft)
    throw std::invalid_argument(fmt::format("speculative: need 1 <= n_draft_min ({}) <= n_draft ({})", p.n_draft_min, p.n_draft));
  if (target.n_vocab() != draft.n_vocab())
    throw std::invalid_argument(fmt::format("speculative: target vocabulary ({}) and draft vocabulary ({}) differ",
                                            target.n_vocab(), draft.n_vocab()));
}

GenerateResult SpeculativeDecoder::generate(const tokenizer::Tokenizer& tok, Sampler& sampler,
                                            std::span<const int32_t> prompt, const GenerateParams& params,
                                            const std::function<void(std::string_view)>& on_text) {
  using Clock = std::chrono::steady_clock;
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
  // step; committed tokens it has not evaluated yet wait in draft_pending.
  draft_.eval(prompt);
  std::vector<int32_t> draft_pending;
  r.n_prompt_eval = static_cast<int32_t>(prompt.size());
  r.prefill_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  const auto t1 = Clock::now();
  TokenSink sink(tok, sampler, params, r, on_text);
  const int32_t limit = params.n_predict < 0 ? INT32_MAX : params.n_predict;
  // The first token comes from the prompt's logits, as in plain decoding.
  int32_t last = sampler.sample(last_logits);
  int32_t depth = params_.n_draft;
  bool go = sink.push(last);
  while (go) {
    // The target evaluates last + d drafted tokens; the draft its pending tokens + last + d - 1.
    const int32_t room_t = target_.n_ctx() - target_.n_past();
    const int32_t room_d = draft_.n_ctx() - draft_.n_past() - static_cast<int32_t>(draft_pending.size());
    if (room_t < 1) {
      r.stop_reason = "context";
      break;
    }
    const int32_t remaining = limit - static_cast<int32_t>(r.ids.size());
    const int32_t d = std::max(0, std::min({depth, room_t - 1, room_d, remaining - 1}));
    // Draft d tokens, keeping each distribution (under the penalties of the tokens before it).
    std::vector<int32_t> drafted;
    std::vector<std::vector<float>> q;
    Sampler dsamp = sampler;
    if (d == 0) {
      draft_pending.push_back(last);
    } else {
      std::vector<int32_t> in = draft_pending;
      in.push_back(last);
      draft_pending.clear();
      for (int32_t i = 0; i < d; ++i) {
        auto l = draft_.eval(in);
        q.push_back(dsamp.probs(l));
        const int32_t x = dsamp.greedy() ? argmax(q.back()) : dsamp.sample_probs(q.back());
        dsamp.accept(x);
        drafted.push_back(x);
        in.assign(1, x);
      }
    }
    // Verify: one target pass over last + drafted, logits for every row.
    std::vector<int32_t> batch{last};
    batch.insert(batch.end(), drafted.begin(), drafted.end());
    const int32_t committed = target_.n_past() + 1;  // tokens committed before this step, last included
    auto tl = target_.eval(batch, /*all_logits=*/true);
    std::vector<std::vector<float>> p;
    Sampler tsamp = sampler;
    const size_t nv = static_cast<size_t>(target_.n_vocab());
    for (int32_t i = 0; i <= d; ++i) {
      p.push_back(tsamp.probs(std::span<const float>(tl.data() + static_cast<size_t>(i) * nv, nv)));
      if (i < d) tsamp.accept(drafted[static_cast<size_t>(i)]);
    }
    const DraftVerdict v = verify_draft(p, q, drafted, sampler);
    ++stats_.n_steps;
    stats_.n_drafted += d;
    stats_.n_accepted += v.n_accepted;
    // The target keeps last + the accepted tokens; the draft keeps what it evaluated of them
    // (all but the last drafted token) and queues the rest.
    target_.rollback(committed + v.n_accepted);
    if (d > 0) {
      const int32_t keep = std::min(v.n_accepted, d - 1);
      draft_.rollback(committed + keep);
      draft_pending.assign(drafted.begin() + keep, drafted.begin() + v.n_accepted);
    }
    for (int32_t i = 0; i < v.n_accepted && go; ++i) go = sink.push(drafted[static_cast<size_t>(i)]);
    if (go) go = sink.push(v.next);
    last = v.next;
    if (params_.adaptive && d > 0) {
      if (v.n_accepted == d) depth = std::min(params_.n_draft, depth + 1);
      else if (v.n_accepted < d / 2) depth = std::max(params_.n_draft_min, depth - 1);
    }
  }
  sink.finish();
  r.decode_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  return r;
}

}  // namespace minfer
