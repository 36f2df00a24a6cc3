"""Is an insight the model wrote founded on the observations it cites?

A small model copies the prompt into its answer: labels ("(rests on O2)"), the example's subject
("Music preferences of Maria: Maria ran 10 km"), text that none of its sources says. An insight is
refused (reported, never stored) when:

* it holds prompt markup: O/I/M labels, "rests on", "no longer true", template placeholders;
* most of the value's words are not in its sources (a summary may rephrase, so half is enough);
* its subject is the prompt's example: its topic words (generic ones such as "hobbies", "family",
  "饮食" aside) appear in the prompt's examples and nowhere in its sources or its value.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..storage.text_analysis import analyse
from ..types import Memory
from .prompts import PromptSet

_MARKUP = re.compile(
    r"(?<![A-Za-z0-9])[OIM]\d{1,3}(?![A-Za-z0-9])|rests on|no longer true|依据\s*[OI]\d|已不再成立|\$[a-z_]+",
    re.IGNORECASE)
_GENERIC_WORDS = """hobbies hobby preferences preference family families work job jobs career health diet food
    habits habit plans plan interests interest life profile pets pet travel travels home relationships
    relationship friends friend person personal information details background education schedule routine
    routines general summary likes dislikes activities activity sports sport free time leisure daily
    character personality situation status current news changes change people social living lifestyle
    finances money studies study hometown residence location places place trips trip goals goal"""
_GENERIC_ZH = ("爱好 偏好 喜好 家人 家庭 工作 职业 健康 饮食 习惯 计划 兴趣 生活 信息 情况 宠物 "
               "出行 旅行 朋友 日程 近况 个人 背景 教育 学习 经历 性格 状态 变化 社交 居住 住处 "
               "财务 目标 业余 时间 日常 的 和 与")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
GENERIC_TERMS = frozenset(analyse(_GENERIC_WORDS) + analyse(_GENERIC_ZH))
MIN_GROUNDED_SHARE = 0.5


def unfounded_insight(subject: str, value: str, sources: Sequence[Memory],
                      prompt: PromptSet | None = None) -> str | None:
    """Why the insight must be refused, or None when it is founded (see the module docstring)."""
    if _MARKUP.search(subject) or _MARKUP.search(value):
        return "prompt markup"
    source_terms = set(analyse(" ".join(m.content for m in sources)))
    value_terms = analyse(value)
    if value_terms:
        grounded = sum(term in source_terms for term in value_terms) / len(value_terms)
        if grounded < MIN_GROUNDED_SHARE:
            return "not founded on its sources"
    # CJK subjects are judged by their characters: bigrams across "的" join name and topic
    subject_terms = {t for t in analyse(subject) if not (_CJK.match(t) and len(t) > 1)}
    topical = subject_terms - GENERIC_TERMS - source_terms - set(value_terms)
    if topical and prompt is not None and topical <= _example_terms(prompt):
        return "its subject is the prompt's example"
    return None


def _example_terms(prompt: PromptSet) -> set[str]:
    return set(analyse(" ".join(f"{e['input']} {e['output']}" for e in prompt.examples)))
