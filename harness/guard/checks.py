"""The configuration guard: assert at startup that the server runs the configuration a profile
names, and refuse results whose speculation or prefill cannot be what it claims.

Every check is a pure function returning `Finding`s, one line each, naming expected vs actual.
The published hazard this exists for: FP8 LM head + MTP with a draft that shared only the head's
weight tensor read FP8 weights as BF16; accept length fell to 1.00 and the "optimized" server ran
slower than baseline, with nothing raised. A one-second check at startup would have caught it.

Server facts are a flat dict keyed by SGLang's `/server_info` names:
    speculative_algorithm, speculative_num_steps, speculative_num_draft_tokens,
    speculative_eagle_topk, enable_fp32_lm_head, moe_runner_backend, quantization,
    attention_backend, version
Each engine adapter builds them (`Engine.server_facts`): SGLang's `/server_info` as it is; vLLM,
which serves no such endpoint, from its launch arguments and `GET /version`.
A key the server does not report at all fails its check: silence is not agreement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.facts import SPECULATIVE_KEYS
from harness.guard.profiles import Profile

FP8_LM_HEAD_ENV = "SGLANG_ENABLE_FP8_LM_HEAD"
# The profile's names for speculative settings -> the server-info keys they are compared with.
SPECULATIVE_SERVER_KEYS = SPECULATIVE_KEYS
PLAIN_SERVER_KEYS = ("enable_fp32_lm_head", "moe_runner_backend", "quantization", "attention_backend")
# SGLang resolves NEXTN to the EAGLE worker and reports the resolved name in /server_info.
ALGORITHM_ALIASES = {"NEXTN": "EAGLE"}
# Config keys under which checkpoints list the modules their quantization leaves alone
# (transformers/AWQ/ModelOpt exports, compressed-tensors, FP8 configs, ModelOpt hf_quant_config).
EXCLUDED_MODULE_KEYS = ("modules_to_not_convert", "ignore", "ignored_layers", "exclude_modules",
                        "excluded_modules")
TORCH_DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
TRUE_WORDS = {"1", "true", "yes", "on"}
UNIT_ACCEPT_LENGTH_TOLERANCE = 0.01
_ABSENT = object()


@dataclass(frozen=True)
class Finding:
    """One check's verdict; `message` is one line naming what was expected and what was found."""

    check: str
    ok: bool
    message: str


@dataclass
class GuardReport:
    """All findings of a server's checks, for the console and the run manifest."""

    findings: list[Finding] = field(default_factory=list)

    def extend(self, findings: Iterable[Finding]) -> GuardReport:
        self.findings.extend(findings)
        return self

    @property
    def ok(self) -> bool:
        return all(finding.ok for finding in self.findings)

    @property
    def failures(self) -> list[Finding]:
        return [finding for finding in self.findings if not finding.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "failures": len(self.failures),
                "findings": [asdict(finding) for finding in self.findings]}

    def format_lines(self) -> list[str]:
        return [f"{'ok  ' if finding.ok else 'FAIL'} {finding.check}: {finding.message}"
                for finding in self.findings]


def _compare(check: str, expected: Any, server_info: Mapping[str, Any], key: str) -> Finding:
    actual = server_info.get(key, _ABSENT)
    if actual is _ABSENT:
        return Finding(check, False, f"expected {expected!r}, but the server did not report {key}")
    if actual == expected:
        return Finding(check, True, f"{actual!r} as expected")
    return Finding(check, False, f"expected {expected!r}, server reports {actual!r}")


def _canonical_algorithm(name: Any) -> Any:
    if not isinstance(name, str):
        return name
    return ALGORITHM_ALIASES.get(name.upper(), name.upper())


def _check_algorithm(expected: str, server_info: Mapping[str, Any]) -> Finding:
    key = SPECULATIVE_SERVER_KEYS["algorithm"]
    actual = server_info.get(key, _ABSENT)
    if actual is _ABSENT:
        return Finding(key, False, f"expected {expected!r}, but the server did not report {key}")
    if _canonical_algorithm(actual) == _canonical_algorithm(expected):
        return Finding(key, True, f"{actual!r} as expected ({expected})")
    return Finding(key, False, f"expected {expected!r}, server reports {actual!r}")


def check_speculative(profile: Profile, server_info: Mapping[str, Any]) -> list[Finding]:
    """Speculation on with the expected algorithm/steps/draft tokens/top-k, or off if `speculative: null`."""
    if "speculative" not in profile.expect:
        return []
    expected = profile.expect["speculative"]
    if expected is None:
        return [_compare(key, None, server_info, key) for key in SPECULATIVE_SERVER_KEYS.values()]
    findings = []
    for name, value in expected.items():
        if name == "algorithm":
            findings.append(_check_algorithm(value, server_info))
        else:
            key = SPECULATIVE_SERVER_KEYS[name]
            findings.append(_compare(key, value, server_info, key))
    return findings


def _version_matches(expected: str, actual: Any) -> bool:
    """`0.5.23` matches `0.5.23` and `0.5.23+cpu`; `0.5` matches any `0.5.x`."""
    if not isinstance(actual, str):
        return False
    release = actual.split("+", 1)[0]
    return release == expected or release.startswith(expected + ".")


def check_version(profile: Profile, server_info: Mapping[str, Any]) -> list[Finding]:
    if "version" not in profile.expect:
        return []
    expected = profile.expect["version"]
    actual = server_info.get("version", _ABSENT)
    engine = profile.engine
    if actual is _ABSENT:
        return [Finding("version", False, f"expected {engine} {expected}, but the server did not report its version")]
    if _version_matches(expected, actual):
        return [Finding("version", True, f"{engine} {actual} as expected")]
    return [Finding("version", False, f"expected {engine} {expected}, server reports {actual!r}")]


def check_server_info(profile: Profile, server_info: Mapping[str, Any]) -> list[Finding]:
    """Every expectation of the profile that the server's flat facts can confirm or refute."""
    findings = check_speculative(profile, server_info)
    findings += [_compare(key, profile.expect[key], server_info, key)
                 for key in PLAIN_SERVER_KEYS if key in profile.expect]
    return findings + check_version(profile, server_info)


def _env_on(env: Mapping[str, str], name: str) -> bool:
    return str(env.get(name, "")).strip().lower() in TRUE_WORDS


def _fp32_head_requested(profile: Profile, server_info: Mapping[str, Any]) -> bool:
    return bool(server_info.get("enable_fp32_lm_head")) or "--enable-fp32-lm-head" in profile.launch.args


def check_contradictions(profile: Profile, server_info: Mapping[str, Any], env: Mapping[str, str]) -> list[Finding]:
    """Refuse settings that cannot hold together. Usable before launch with `server_info={}`
    (then the profile's own arguments stand for the server's) and `env` = the launch environment."""
    if _env_on(env, FP8_LM_HEAD_ENV) and _fp32_head_requested(profile, server_info):
        return [Finding("lm_head_precision_switches", False,
                        f"{FP8_LM_HEAD_ENV}=1 and enable_fp32_lm_head are both set; they are mutually "
                        f"exclusive (FP8 head weights vs an FP32 head): drop one")]
    return [Finding("lm_head_precision_switches", True, "FP8 and FP32 LM head switches do not conflict")]


def _excluded_modules(quant_config: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """The first excluded-modules list in a quantization config, with the key it was under."""
    for key in EXCLUDED_MODULE_KEYS:
        modules = quant_config.get(key)
        if isinstance(modules, list):
            return key, [str(module) for module in modules]
    return None


def _checkpoint_dtype(model_config: Mapping[str, Any]) -> str:
    # Newer transformers write `dtype`, older ones `torch_dtype`.
    name = model_config.get("dtype") or model_config.get("torch_dtype")
    return TORCH_DTYPE_NAMES.get(str(name), "unknown")


def _checkpoint_head_dtype(model_config: Mapping[str, Any]) -> tuple[str, str]:
    dtype = _checkpoint_dtype(model_config)
    quant_config = model_config.get("quantization_config")
    if not isinstance(quant_config, Mapping):
        return dtype, f"checkpoint is not quantized; its dtype is {dtype}"
    method = quant_config.get("quant_method", "unnamed method")
    excluded = _excluded_modules(quant_config)
    # Entries are plain names, globs or `re:` patterns; every form spells lm_head out.
    if excluded and any("lm_head" in module for module in excluded[1]):
        return dtype, f"checkpoint quantization_config ({method}) lists lm_head in {excluded[0]}: head stays {dtype}"
    if quant_config.get("lm_head") is False:  # GPTQ-style configs say it with a flag
        return dtype, f"checkpoint quantization_config ({method}) sets lm_head false: head stays {dtype}"
    return "unknown", (f"checkpoint quantization_config ({method}) does not exclude lm_head; "
                       f"whether the head is quantized depends on the model code")


def lm_head_dtype(model_config: Mapping[str, Any], env: Mapping[str, str],
                  server_info: Mapping[str, Any]) -> tuple[str, str]:
    """The dtype the LM head weights are read in, and why: bf16 | fp16 | fp32 | fp8 | unknown.

    No server reports this, so it is derived: SGLANG_ENABLE_FP8_LM_HEAD=1 quantizes the head
    online; enable_fp32_lm_head (flag, or `enable_lm_head_fp32` in the model config) runs it in
    FP32; otherwise the checkpoint decides: a head listed among the quantization config's
    excluded modules (or a plain checkpoint) keeps the checkpoint's dtype.
    """
    if _env_on(env, FP8_LM_HEAD_ENV):
        return "fp8", f"{FP8_LM_HEAD_ENV}=1 quantizes the LM head to FP8 online"
    if server_info.get("enable_fp32_lm_head"):
        return "fp32", "enable_fp32_lm_head is true"
    if model_config.get("enable_lm_head_fp32"):
        return "fp32", "the model config sets enable_lm_head_fp32"
    if not model_config:
        return "unknown", "no checkpoint config to read"
    return _checkpoint_head_dtype(model_config)


def check_lm_head(profile: Profile, model_config: Mapping[str, Any], env: Mapping[str, str],
                  server_info: Mapping[str, Any]) -> list[Finding]:
    """The derived LM head dtype against `expect.lm_head_dtype`."""
    if "lm_head_dtype" not in profile.expect:
        return []
    expected = profile.expect["lm_head_dtype"]
    actual, reason = lm_head_dtype(model_config, env, server_info)
    if actual == expected:
        return [Finding("lm_head_dtype", True, f"{actual} as expected ({reason})")]
    return [Finding("lm_head_dtype", False, f"expected {expected}, found {actual} ({reason})")]


def check_canary(profile: Profile, accept_length: float | None, accepted_drafts: float | None = None,
                 proposed_drafts: float | None = None) -> list[Finding]:
    """With speculation expected, the mean accept length must exceed the canary's threshold.

    1.00 means no draft token ever landed: each round paid for verification and got only the
    token a plain decode step would have produced. Where the server counts draft tokens, 0 accepted
    of some proposed says the same exactly (SGLang's accept length then reads N / (N - 1), not 1,
    because it counts the first token, from prefill). Nothing to check without speculation.
    """
    if not profile.expects_speculation:
        return []
    threshold = profile.canary.min_accept_length
    if accept_length is None:
        return [Finding("canary", False, "no verify round: the server reported no speculative statistics, or "
                                         "its drafter proposed nothing, but the profile expects "
                                         f"{profile.expect['speculative'].get('algorithm', 'speculation')}")]
    none_landed = accepted_drafts == 0 and proposed_drafts is not None and proposed_drafts > 0
    if none_landed or abs(accept_length - 1.0) <= UNIT_ACCEPT_LENGTH_TOLERANCE:
        counted = f" (0 of {proposed_drafts:.0f} draft tokens accepted)" if none_landed else ""
        return [Finding("canary", False,
                        f"drafts never accepted: accept length {accept_length:.2f}{counted} is the signature of the "
                        f"FP8-LM-head + MTP weight-sharing bug (draft reads FP8 weights as BF16), or of a "
                        f"drafter that proposes nothing; every verification round is paid for nothing")]
    if accept_length <= threshold:
        return [Finding("canary", False, f"accept length {accept_length:.2f} does not exceed the canary's "
                                         f"minimum {threshold:.2f}: drafts are almost never accepted")]
    return [Finding("canary", True, f"accept length {accept_length:.2f} exceeds {threshold:.2f}")]


def check_prefix_cache(cached_tokens: Sequence[int | None]) -> list[Finding]:
    """Synthetic prompts must be prefilled in full: any token served from the prefix cache fails.

    `cached_tokens` holds one value per request; None where the server did not say. If no request
    reported it, the check cannot pass: an unmeasured prefill is not a measured one.
    """
    reported = [count for count in cached_tokens if count is not None]
    if not reported:
        return [Finding("prefix_cache", False, f"no cached_tokens reported for any of {len(cached_tokens)} "
                                               f"requests: cannot confirm the prompts were prefilled in full")]
    hits = [count for count in reported if count > 0]
    if hits:
        return [Finding("prefix_cache", False,
                        f"prefix cache served {sum(hits)} tokens of the synthetic prompts ({len(hits)} of "
                        f"{len(cached_tokens)} requests): prefill was not measured in full")]
    unreported = len(cached_tokens) - len(reported)
    note = f" ({unreported} requests did not report)" if unreported else ""
    return [Finding("prefix_cache", True, f"0 cached tokens across {len(reported)} requests{note}")]


def check_startup(profile: Profile, server_info: Mapping[str, Any], env: Mapping[str, str],
                  model_config: Mapping[str, Any]) -> GuardReport:
    """The checks that run once the server is up and before any measured request."""
    return GuardReport([*check_server_info(profile, server_info),
                        *check_contradictions(profile, server_info, env),
                        *check_lm_head(profile, model_config, env, server_info)])
