"""`bench qa` end to end: the CLI, the real stores and local embedder, the answering and judging
model behind real HTTP (the fake server), answering and judging the way real models do: right,
wrong, cut off, empty, a 500 first, verdicts wrapped in prose, in lower case, in Chinese, or
unreadable. Plus the metrics, the date rules and the sampler on their own."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from memoryscope_plugins.bench.locomo import load_conversations
from memoryscope_plugins.bench.qa import stratified_sample
from memoryscope_plugins.bench.qa_judge import (
    deterministic_verdict,
    parse_verdict,
    relative_gold_period,
    zh_numerals_to_digits,
)
from memoryscope_plugins.bench.qa_metrics import contains, token_f1
from memoryscope_plugins.cli.main import main
from tests.support.consolidation_helpers import Brain, parse_prompt
from tests.support.fakes.fake_model_server import (
    OPENAI_CHAT,
    FakeModelServer,
    RecordedRequest,
    Reply,
    openai_completion,
)
from tests.support.paths import DATA as TEST_DATA

DATA = TEST_DATA / "qa_tiny_locomo.json"

# What the answering model says per question (every configuration but `none`).
ANSWERS = {
    "What pet did Nora adopt?": "A grey rabbit.",                       # exact
    "When did Nora adopt Pepper?": "2024-03-05",                         # date, ISO for "5 March 2024"
    "Where did Nora run her first half marathon?": "In Lisbon, Portugal",  # contains
    "When did Nora run the half marathon?": "14 April 2024",             # the sunday before 20 April
    "What instrument does Felix play and where did he perform?": "He plays the cello and performed at a concert",
    "What is Nora's job?": "",                                           # empty: wrong without a judge
    "Would Nora likely enjoy caring for animals?": "Yes, she loves her rabbit",
    "Where does Felix's sister live?": "Felix's sister lives in Os",      # cut off (finish_reason length)
    "What did Felix's teacher tell him?": "To practise scales every morning.",
    "陈悦搬到了哪里？": "杭州西湖边的新家",
    "陈悦什么时候去黄山爬山的？": "2024-07-13",
    "陈悦做什么工作？": "茶企的设计岗",  # not words of the gold (that would be `in_gold_core`): the LLM decides
    "和陈悦一起爬黄山的人在哪里读书？": "在上海读大学",
}
# The judge's replies per graded answer (a list: one per attempt).
VERDICTS = {
    "I don't know.": ["The answer is wrong: it gives no pet, no date, nothing."],
    "He plays the cello and performed at a concert": ["correct - it names the cello and the concert"],
    "Yes, she loves her rabbit": ["I think so.", "**Verdict:** CORRECT"],
    "Felix's sister lives in Os": ["Hmm, hard to say.", "It depends."],
    "茶企的设计岗": ["正确。回答与标准答案一致。"],
    "我不知道。": ["错误"],
}
EXPECTED_TURNS = {  # question -> (j, judged_by)
    "What pet did Nora adopt?": (1, "exact"),
    "When did Nora adopt Pepper?": (1, "date"),
    "Where did Nora run her first half marathon?": (1, "contains"),
    "When did Nora run the half marathon?": (1, "relative_date"),
    "What instrument does Felix play and where did he perform?": (1, "llm"),
    "What is Nora's job?": (0, "empty"),
    "Would Nora likely enjoy caring for animals?": (1, "llm"),
    "Where does Felix's sister live?": (0, "llm"),
    "What did Felix's teacher tell him?": (1, "contains"),
    "陈悦搬到了哪里？": (1, "contains"),
    "陈悦什么时候去黄山爬山的？": (1, "date"),
    "陈悦做什么工作？": (1, "llm"),
    "和陈悦一起爬黄山的人在哪里读书？": (1, "contains"),
}
_QUESTION = re.compile(r"(?:Question: |问题：)(.+)")
_GRADED = re.compile(r"(?:Answer to grade: |待评判的回答：)(.*)")


def kind_of(request: RecordedRequest) -> str:
    messages = request.json["messages"]
    if parse_prompt(messages).kind != "chat":
        return "consolidation"
    if messages[0]["role"] == "system":
        return "answer"
    text = messages[0]["content"]
    return "judge" if text.startswith(("You grade", "你要评判")) else "probe"


class ScriptedModel:
    """Answers and judges like a real model, misbehaving where the tables say so."""

    def __init__(self, fail_answer_number: int | None = None, error_first_answer: bool = False) -> None:
        self.answers = 0
        self.fail_answer_number = fail_answer_number
        self.error_first_answer = error_first_answer
        self.judged: Counter[str] = Counter()
        self.brain = Brain()  # consolidation prompts: one observation per message

    def __call__(self, server: FakeModelServer, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        text = "".join(m["content"] for m in messages)  # a realistic usage figure:
        cjk = len(re.findall(r"[\u4e00-\u9fff]", text))  # a CJK character is about a token
        tokens = cjk + (len(text) - cjk) // 4 + 1
        kind = kind_of(request)
        if kind == "consolidation":
            return self.brain(server, request)
        if kind == "probe":
            return Reply(json=openai_completion("OK", prompt_tokens=tokens))
        if kind == "judge":
            graded = _GRADED.search(messages[0]["content"]).group(1).strip()
            replies = VERDICTS[graded]
            reply = replies[min(self.judged[graded], len(replies) - 1)]
            self.judged[graded] += 1
            return Reply(json=openai_completion(reply, prompt_tokens=tokens))
        self.answers += 1
        if self.error_first_answer and self.answers == 1:
            return Reply(status=500, json={"error": {"message": "server busy"}})
        if self.answers == self.fail_answer_number:
            return Reply(status=400, json={"error": {"message": "bad request"}})
        question = _QUESTION.search(messages[-1]["content"]).group(1).strip()
        system = messages[0]["content"]
        if "<long_term_memory>" not in system:  # `none`
            text = "我不知道。" if re.search(r"[\u4e00-\u9fff]", question) else "I don't know."
        else:
            text = ANSWERS[question]
        body = openai_completion(text, prompt_tokens=tokens)
        if question == "Where does Felix's sister live?":
            body["choices"][0]["finish_reason"] = "length"
        return Reply(json=body)


@pytest.fixture
def server():
    with FakeModelServer() as fake:
        yield fake


def config_file(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(f"llm: {{provider: openai, model: fake, base_url: '{base_url}', api_key: sk-test-000}}\n",
                    encoding="utf-8")
    return path


def run_cli(tmp_path: Path, server: FakeModelServer, *extra: str, configs: str = "none,vector,turns") -> int:
    return main(["--config", str(config_file(tmp_path, server.url + "/v1")), "bench", "qa", "--data", str(DATA),
                 "--configs", configs, "--no-progress", *extra])


def answer_requests(server: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in server.requests_to(OPENAI_CHAT) if kind_of(r) == "answer"]


def request_key(request: RecordedRequest) -> tuple[str, str]:
    messages = request.json["messages"]
    return messages[0]["content"], messages[-1]["content"]


# ---------------------------------------------------------------------------------------------
# The whole run


def test_run_judges_every_answer_by_the_right_path(tmp_path, server, capsys):
    model = ScriptedModel(error_first_answer=True)
    server.route(OPENAI_CHAT, model)
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out)) == 0
    printed = capsys.readouterr().out
    assert "| config | n | J |" in printed and "| turns | 13 |" in printed
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["complete"] is True
    rows = {row["question"]: row for row in report["questions"]}
    assert len(rows) == 13  # the category-5 question is not asked by default
    for question, (j, rule) in EXPECTED_TURNS.items():
        answer = rows[question]["answers"]["turns"]
        assert (answer["j"], answer["judged_by"]) == (j, rule), question
    assert rows["Where does Felix's sister live?"]["answers"]["turns"]["judge_unparsed"] is True
    assert rows["Where does Felix's sister live?"]["answers"]["turns"]["truncated"] is True
    assert "judge_unparsed" not in rows["Would Nora likely enjoy caring for animals?"]["answers"]["turns"]
    assert all(row["answers"]["none"]["j"] == 0 and row["answers"]["none"]["judged_by"] == "no_answer"
               for row in report["questions"])
    turns = report["configs"]["turns"]
    assert turns["n"] == 13 and turns["j"] == pytest.approx(11 / 13, abs=1e-4)
    assert set(turns["by_category"]) == {"1", "2", "3", "4"}
    assert set(turns["by_language"]) == {"en", "zh"} and turns["judge_unparsed"] == 1
    assert report["configs"]["none"]["j"] == 0.0
    assert set(report["configs"]) == {"none", "vector", "turns"}
    for key in ("n", "j", "f1", "contains", "by_category", "prompt_tokens_mean", "context_tokens_mean",
                "answer_s_p50", "retrieve_ms_p50", "skipped"):
        assert key in turns
    assert turns["context_tokens_mean"] > 0 and report["configs"]["none"]["context_tokens_mean"] == 0
    # "I don't know" is a rule's; identical answers (vector's and turns') are judged once; the 500
    # was retried and the answer kept once
    assert model.judged["I don't know."] == 0 and model.judged["Felix's sister lives in Os"] == 2
    assert model.judged["He plays the cello and performed at a concert"] == 1
    answers = Counter(request_key(r) for r in answer_requests(server))
    assert len(answers) == 39 and sorted(answers.values()) == [1] * 38 + [2]
    chat_calls = len(server.requests_to(OPENAI_CHAT))
    assert report["llm"]["calls"] == chat_calls - 1  # one call: the 500 was retried inside it
    assert report["llm"]["tokens"] > 0
    # the prompt: memory block in the system message, then the date and the question
    turns_prompt = next(r for r in answer_requests(server) if "<long_term_memory>" in r.json["messages"][0]["content"]
                        and "What is Nora's job?" in r.json["messages"][-1]["content"])
    assert turns_prompt.json["messages"][-1]["content"].startswith("Current date: 2024-04-20")


def test_calls_are_ordered_for_the_prompt_cache(tmp_path, server):
    server.route(OPENAI_CHAT, ScriptedModel())
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), "--top-k", "2",
                   configs="none,full,vector,turns,observations") == 0
    requests = server.requests_to(OPENAI_CHAT)
    kinds = [kind_of(r) for r in requests]
    assert kinds[0] == "probe"
    last_answer = max(i for i, k in enumerate(kinds) if k == "answer")
    assert all(k == "judge" for k in kinds[last_answer + 1:]) and "judge" not in kinds[:last_answer]
    conversations = load_conversations(DATA, require_evidence=False)
    for conv in conversations:
        every_turn = [t.text for s in conv.sessions for t in s.turns]
        positions = [i for i, r in enumerate(requests) if kind_of(r) == "answer"
                     and all(text in r.json["messages"][0]["content"] for text in every_turn)]
        n_questions = sum(1 for q in conv.questions if q.category != 5)
        assert len(positions) == n_questions
        assert positions == list(range(positions[0], positions[0] + n_questions))  # consecutive
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["configs"]["full"]["n"] == 13 and report["configs"]["full"]["skipped"] == 0
    assert report["configs"]["observations"]["n"] == 13


def test_full_is_skipped_with_a_reason_above_the_token_limit(tmp_path, server):
    server.route(OPENAI_CHAT, ScriptedModel())
    out = tmp_path / "qa.json"
    # both conversations' prompts are about 260 tokens: under 400 they are asked, over 200 skipped
    assert run_cli(tmp_path, server, "--out", str(out), "--max-context-tokens", "200", configs="none,full") == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    full = report["configs"]["full"]
    assert full["skipped"] == 13 and full["n"] == 0
    assert "--max-context-tokens 200" in full["skipped_reasons"][0]
    assert not [r for r in answer_requests(server) if "<long_term_memory>" in r.json["messages"][0]["content"]]
    out.unlink()
    assert run_cli(tmp_path, server, "--out", str(out), "--max-context-tokens", "400", configs="none,full") == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["configs"]["full"]["skipped"] == 0 and report["configs"]["full"]["n"] == 13


def test_a_conversation_the_server_cannot_hold_is_skipped_not_fatal(tmp_path, server):
    model = ScriptedModel()

    def small_context(fake: FakeModelServer, request: RecordedRequest) -> Reply:
        system = request.json["messages"][0]["content"]
        if kind_of(request) == "answer" and "Pepper chewed my running shoes" in system and "Ida" in system \
                and request.json["messages"][0]["role"] == "system" and "Yesterday I adopted" in system:
            return Reply(status=400, json={"error": {"code": 400, "type": "exceed_context_size_error",
                                                     "message": "the request exceeds the available context size"}})
        return model(fake, request)

    server.route(OPENAI_CHAT, small_context)
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), configs="none,full") == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    full = report["configs"]["full"]
    assert full["skipped"] == 9 and full["n"] == 4 and "refused the prompt" in full["skipped_reasons"][0]
    assert report["complete"] is True


def test_a_crash_mid_run_resumes_without_repeating_done_answers(tmp_path, server, capsys):
    model = ScriptedModel(fail_answer_number=20)
    server.route(OPENAI_CHAT, model)
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out)) == 1
    assert "rerun the same command" in capsys.readouterr().err
    partial = json.loads(out.read_text(encoding="utf-8"))
    assert partial["complete"] is False
    assert sum(len(row["answers"]) for row in partial["questions"]) == 19
    model.fail_answer_number = None
    assert run_cli(tmp_path, server, "--out", str(out)) == 0
    answers = Counter(request_key(r) for r in answer_requests(server))
    assert len(answers) == 39 and sorted(answers.values()) == [1] * 38 + [2]  # only the failed one twice
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["complete"] is True and report["configs"]["turns"]["n"] == 13
    assert report["llm"]["calls"] == len(server.requests_to(OPENAI_CHAT))  # the failed call counts too
    # a rerun with one more configuration answers only that one
    before = len(answer_requests(server))
    assert run_cli(tmp_path, server, "--out", str(out), configs="none,vector,turns,observations") == 0
    assert len(answer_requests(server)) - before == 13
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report["configs"]) == {"none", "vector", "turns", "observations"}


def test_a_rerun_with_another_sample_is_refused_and_leaves_the_file(tmp_path, server, capsys):
    server.route(OPENAI_CHAT, ScriptedModel())
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), "--limit", "5", "--seed", "1", configs="none") == 0
    before = out.read_bytes()
    capsys.readouterr()
    assert run_cli(tmp_path, server, "--out", str(out), "--limit", "5", "--seed", "2", configs="none") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "questions_sha256" in err and "seed" in err
    assert out.read_bytes() == before


def test_consolidated_answers_from_our_own_consolidation(tmp_path, server):
    model = ScriptedModel()
    server.route(OPENAI_CHAT, model)
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), configs="none,consolidated") == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    consolidation = report["consolidation"]
    assert set(consolidation) == {"tiny-en", "tiny-zh"}
    for stats in consolidation.values():
        assert stats["llm_calls"] > 0 and stats["left_pending"] == 0 and stats["memories"] > 0
    kinds = [kind_of(r) for r in server.requests_to(OPENAI_CHAT)]
    assert report["llm"]["calls"] == len(kinds)  # consolidation calls are counted too
    # the consolidated block holds the model's observations ("<speaker> said: ...")
    blocks = [r.json["messages"][0]["content"] for r in answer_requests(server)
              if "<long_term_memory>" in r.json["messages"][0]["content"]]
    assert len(blocks) == 13 and all("said:" in block for block in blocks)
    # each conversation is consolidated right before its own consolidated questions
    first_en_answer = next(i for i, r in enumerate(server.requests_to(OPENAI_CHAT))
                           if kind_of(r) == "answer" and "<long_term_memory>" in r.json["messages"][0]["content"])
    assert "consolidation" in kinds[:first_en_answer]
    assert report["configs"]["consolidated"]["n"] == 13


@pytest.mark.parametrize("content", [
    '{"not": "a list"}',
    '[{"sample_id": "x", "qa": []}]',
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "yesterday",'
     ' "session_1": []}, "qa": []}]'),
    "not json at all",
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": [{"question": "q?",'
     ' "answer": "a", "category": 4}]}]'),
])
def test_a_file_not_in_locomo_format_is_a_one_line_error(tmp_path, server, capsys, content):
    server.route(OPENAI_CHAT, ScriptedModel())
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    out = tmp_path / "qa.json"
    code = main(["--config", str(config_file(tmp_path, server.url + "/v1")), "bench", "qa", "--data", str(bad),
                 "--configs", "none", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "LoCoMo" in err
    assert not out.exists() and not server.requests


def test_unknown_configuration_and_unreachable_model_are_one_line_errors(tmp_path, server, capsys):
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), configs="none,mem0") == 2
    err = capsys.readouterr().err
    assert "unknown configuration mem0" in err and err.count("\n") == 1
    url = server.url
    server.stop()  # nothing listens there any more
    assert main(["--config", str(config_file(tmp_path, url + "/v1")), "bench", "qa", "--data", str(DATA),
                 "--configs", "none", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "unreachable" in err and err.count("\n") == 1 and "sk-test" not in err
    assert not out.exists()


def test_an_existing_file_that_is_not_a_report_is_never_overwritten(tmp_path, server, capsys):
    server.route(OPENAI_CHAT, ScriptedModel())
    out = tmp_path / "notes.json"
    out.write_text('{"mine": true}', encoding="utf-8")
    assert run_cli(tmp_path, server, "--out", str(out)) == 2
    assert out.read_text(encoding="utf-8") == '{"mine": true}'


# ---------------------------------------------------------------------------------------------
# Metrics, date rules, verdict parsing, the sampler


def test_token_f1_follows_locomo_normalisation():
    assert token_f1("Grey rabbits!", "a grey rabbit") == 1.0  # articles, punctuation, Porter stems
    assert token_f1("a dog", "a grey rabbit") == 0.0
    assert token_f1("cello", "cello, a small concert", category=1) == pytest.approx(0.5)
    assert token_f1("counseling", "counseling; psychology", category=3) == 1.0
    assert token_f1("blue", "red") == 0.0 and token_f1("", "red") == 0.0


def test_chinese_f1_counts_characters():
    assert token_f1("杭州西湖", "杭州西湖边") == pytest.approx(2 * 0.8 / 1.8)
    assert token_f1("在上海", "上海") == pytest.approx(2 * (2 / 3) / (2 / 3 + 1))
    assert token_f1("北京", "上海") == 0.0
    assert contains("她住在杭州西湖边。", "杭州西湖边") and not contains("杭州", "杭州西湖边")
    assert contains("In Lisbon, Portugal", "lisbon") and not contains("Lisbonne", "Lisbon")


@pytest.mark.parametrize("answer,gold,expected", [
    ("2024-03-05", "5 March 2024", (True, "date")),
    ("March 5th, 2024", "5 March 2024", (True, "date")),
    ("On 5 Mar 2024.", "5 March 2024", (True, "date")),
    ("2023-05-07", "May 2023", (True, "date")),
    ("7 May 2023", "2023", (True, "date")),
    ("2024年7月13日", "13 July 2024", (True, "date")),
    ("2024-07-13", "2024年7月13日", (True, "date")),
    ("2025-01-01", "2025年1月1日（元旦）", (True, "date")),
    ("2025年1月5日", "2025年1月1日（元旦）", (False, "date_mismatch")),
    ("1 January 2025", "1 January 2025 (New Year's Day)", (True, "date")),
    ("6 March 2024", "5 March 2024", (False, "date_mismatch")),
    ("June 2023", "May 2023", (False, "date_mismatch")),
    ("14 April 2024", "The sunday before 20 April 2024", (True, "relative_date")),
    ("2024-04-15", "The week before 20 April 2024", (True, "relative_date")),
    ("Lisbon", "lisbon", (True, "exact")),
    ("Harry Potter series", "The Harry Potter stuff", (True, "content_words")),
    ("About 4 months", "nearly four months", (True, "number")),
    ("", "Lisbon", (False, "empty")),
])
def test_deterministic_rules(answer, gold, expected):
    verdict = deterministic_verdict(answer, gold)
    assert verdict is not None and (verdict.correct, verdict.rule) == expected


@pytest.mark.parametrize("answer,gold", [
    ("May 2023", "7 May 2023"),                 # less precise than the gold: the LLM decides
    ("the day before 6 March 2024", "5 March 2024"),  # a relative answer: the LLM decides
    ("I don't know, maybe Lisbon", "Lisbon"),   # hedged
    ("Lisbon or Porto", "Lisbon"),              # a list of guesses
    ("yesterday", "5 March 2024"),
    ("the day before 7 May 2023", "7 May 2023"),  # names the gold's day but means the 6th
    ("the day before 14 April 2024", "The sunday before 20 April 2024"),
    ("sister of John's friend", "John's sister"),  # the same words in another order
    ("Potter", "The Harry Potter stuff"),        # part of the gold
    ("她不住在杭州西湖边", "杭州西湖边"),
    ("She is a nurse, a teacher, a cook, a driver, a pilot, a painter, a singer, a writer, a baker", "nurse"),
])
def test_unsure_cases_go_to_the_llm(answer, gold):
    assert deterministic_verdict(answer, gold) is None


def test_relative_gold_periods():
    assert str(relative_gold_period("The sunday before 25 May 2023").first) == "2023-05-21"
    week = relative_gold_period("The week before 9 June 2023")
    assert (str(week.first), str(week.last)) == ("2023-06-02", "2023-06-08")
    weekend = relative_gold_period("the weekend before 17 July 2023")
    assert (str(weekend.first), str(weekend.last)) == ("2023-07-15", "2023-07-16")
    assert relative_gold_period("A few days before 9 June 2023") is None


@pytest.mark.parametrize("reply,expected", [
    ("CORRECT", True), ("wrong", False), ("The answer is correct.", True), ("INCORRECT", False),
    ("**Verdict:** WRONG\nThe gold says Lisbon.", False), ('{"label": "CORRECT"}', True),
    ("<think>is it wrong?</think>\nCORRECT", True), ("正确", True), ("错误。", False), ("不正确", False),
    ("This is not correct.", False), ("", None), ("I think so.", None),
    ("CORRECT? or WRONG?", None),
])
def test_parse_verdict(reply, expected):
    assert parse_verdict(reply) is expected


def test_stratified_sample_is_proportional_deterministic_and_in_file_order():
    conversations = load_conversations(DATA, require_evidence=False)
    pool = [(c, q) for c in conversations for q in c.questions if q.category != 5]
    counts = Counter(q.category for _c, q in pool)
    assert counts == {4: 6, 2: 3, 1: 3, 3: 1}
    sample = stratified_sample(pool, 6, seed=3)
    assert Counter(q.category for _c, q in sample) == {4: 3, 2: 1, 1: 1, 3: 1}  # 2.77, 1.38, 1.38, 0.46
    assert sample == stratified_sample(pool, 6, seed=3)
    assert [pool.index(item) for item in sample] == sorted(pool.index(item) for item in sample)
    picks = {tuple(id(q) for _c, q in stratified_sample(pool, 6, seed=s)) for s in range(8)}
    assert len(picks) > 1  # the seed matters
    assert stratified_sample(pool, 100, seed=0) == pool


def test_estimate_calls_no_model_and_writes_nothing(tmp_path, server, capsys):
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), "--estimate", "--max-context-tokens", "200",
                   configs="none,full,turns") == 0
    printed = capsys.readouterr().out
    assert "| turns | 13 |" in printed and "| none | 13 |" in printed
    assert "| full | 0 | 0 | 0 | 13 |" in printed  # both conversations are over 200 tokens
    assert "judge: at most 26 calls" in printed
    assert not server.requests and not out.exists()


def test_hand_labels_measure_the_judge(tmp_path, server, capsys):
    server.route(OPENAI_CHAT, ScriptedModel())
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), configs="none,turns") == 0
    labels = tmp_path / "labels.json"
    assert main(["bench", "qa-label", "--in", str(out), "--out", str(labels), "--limit", "8"]) == 0
    items = json.loads(labels.read_text(encoding="utf-8"))
    assert len(items) == 8 and all(item["label"] is None for item in items)
    assert items[0]["judged_by"] == "llm" and len({item["judged_by"] for item in items}) >= 4
    for number, item in enumerate(items):  # a person agrees with all but the first LLM verdict
        item["label"] = 1 - item["j"] if number == 0 else item["j"]
    labels.write_text(json.dumps(items), encoding="utf-8")
    capsys.readouterr()
    assert main(["bench", "qa-label", "--in", str(out), "--out", str(labels)]) == 0
    printed = capsys.readouterr().out
    assert "judge agreement: 7/8 (88%)" in printed
    llm_labelled = sum(1 for item in items if item["judged_by"] == "llm")
    assert f"| llm | {llm_labelled} | {llm_labelled - 1} |" in printed


def test_rejudge_applies_the_current_rules_and_keeps_llm_verdicts(tmp_path, server):
    model = ScriptedModel()
    server.route(OPENAI_CHAT, model)
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), configs="none,turns") == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    rows = {row["question"]: row for row in report["questions"]}
    # as if an older rule had decided two answers, and the judge had once been unreadable
    rows["What pet did Nora adopt?"]["answers"]["turns"].update(j=0, judged_by="old_rule")
    rows["Would Nora likely enjoy caring for animals?"]["answers"]["turns"].update(j=0, judge_unparsed=True)
    out.write_text(json.dumps(report), encoding="utf-8")
    before = len(server.requests_to(OPENAI_CHAT))
    assert run_cli(tmp_path, server, "--out", str(out), "--rejudge", configs="none,turns") == 0
    calls = [kind_of(r) for r in server.requests_to(OPENAI_CHAT)[before:]]
    # only the unreadable verdicts are asked again: this one (once) and the cut-off answer (twice)
    assert calls == ["probe", "judge", "judge", "judge"]
    rows = {row["question"]: row for row in json.loads(out.read_text(encoding="utf-8"))["questions"]}
    assert rows["What pet did Nora adopt?"]["answers"]["turns"]["judged_by"] == "exact"
    assert rows["What pet did Nora adopt?"]["answers"]["turns"]["j"] == 1
    assert rows["Would Nora likely enjoy caring for animals?"]["answers"]["turns"]["j"] == 1
    assert rows["What instrument does Felix play and where did he perform?"]["answers"]["turns"]["j"] == 1


def test_turns_context_is_the_block_the_adapters_inject(tmp_path, server, local_embedder):
    from memoryscope_plugins import MemoryScope
    from memoryscope_plugins.adapters._common import MemoryBridge, MemoryConfig
    from memoryscope_plugins.bench.locomo import ingest
    from memoryscope_plugins.bench.qa import question_time

    server.route(OPENAI_CHAT, ScriptedModel())
    assert run_cli(tmp_path, server, "--out", str(tmp_path / "qa.json"), "--top-k", "3", configs="turns") == 0
    systems = [r.json["messages"][0]["content"] for r in answer_requests(server)]
    conv = load_conversations(DATA, require_evidence=False)[0]
    question = conv.questions[0]
    with MemoryScope(path=tmp_path / "check.db", embedder=local_embedder) as engine:
        ingest(engine, conv, "turns")
        result = engine.retrieve(conv.id, question.text, top_k=3, now=question_time(conv))
        block = MemoryBridge(engine, MemoryConfig(top_k=3), "check").block(result)
    assert block.startswith("<long_term_memory>") and block.count("\n") >= 3
    assert any(system.endswith("\n\n" + block) for system in systems)


# -- the Chinese gold-core rule (made-up answers in the shape the local model gives) -----------------------------


@pytest.mark.parametrize("answer,gold,expected", [
    ("护士", "社区医院的护士", True),                                        # the core of a longer gold
    ("杭州", "在杭州过年，因为父母已经搬来同住（往年都回老家）。", True),
    ("六百零五", "总分605分，比上次涨了12分。", True),                         # numerals read as digits
    ("三百一", "血糖降到310，医生说控制得不错。", True),
    ("产品经理", "一家小公司的运营主管；之前是产品经理。", None),               # what used to be true: not the core
    ("老家", "和女儿一家同住（以前一个人住在老家）。", None),                   # only in a bracketed remark
    ("跑步", "游泳更合适。她跑步时伤过膝盖，之后一直坚持游泳。", None),         # only after the first sentence
    ("是", "不是，她已经换到白班了。", None),                                  # too short to mean anything
])
def test_a_short_chinese_answer_is_right_when_it_is_part_of_the_gold_core(answer, gold, expected):
    verdict = deterministic_verdict(answer, gold)
    if expected is None:
        assert verdict is None or verdict.rule != "in_gold_core"
    else:
        assert verdict is not None and verdict.correct and verdict.rule == "in_gold_core"


@pytest.mark.parametrize("numerals,digits", [("六百二十一", "621"), ("四百一", "410"), ("一百零五", "105"),
                                             ("十五", "15"), ("一千二", "1200"), ("两万三千", "23000"),
                                             ("三个", "三个"), ("一起", "一起")])
def test_chinese_numerals_with_a_unit_are_read_as_digits(numerals, digits):
    assert zh_numerals_to_digits(numerals) == digits


# -- settings per configuration, --redo, and files of the first format ---------------------------------------------


def answered_configs(requests: list[RecordedRequest]) -> Counter[str]:
    """Which configuration each answer request is: no block (`none`), a block of bare "[date]
    Speaker:" lines (`vector`), or `retrieve`'s block, which opens with today's date (`turns`)."""
    kinds: Counter[str] = Counter()
    for request in requests:
        system = request.json["messages"][0]["content"]
        if "<long_term_memory>" not in system:
            kinds["none"] += 1
        else:
            kinds["vector" if system.split("<long_term_memory>\n", 1)[1].startswith("[") else "turns"] += 1
    return kinds


def settings_file(tmp_path: Path, server: FakeModelServer, extra: str) -> Path:
    path = config_file(tmp_path, server.url + "/v1")
    path.write_text(path.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return path


def test_a_changed_retrieval_setting_answers_only_the_configurations_that_use_it_again(tmp_path, server, capsys):
    model = ScriptedModel()
    server.route(OPENAI_CHAT, model)
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out)) == 0
    first = json.loads(out.read_text(encoding="utf-8"))
    assert answered_configs(answer_requests(server)) == {"none": 13, "vector": 13, "turns": 13}
    assert first["settings_by_config"]["turns"]["retrieval"]["speaker_boost"] == 0.5
    assert "retrieval_sha256" not in first["spec"] and "embedder" not in first["spec"]
    before = len(answer_requests(server))
    capsys.readouterr()
    changed = settings_file(tmp_path, server, "retrieval: {speaker_boost: 0.7}\n")
    assert main(["--config", str(changed), "bench", "qa", "--data", str(DATA), "--configs", "none,vector,turns",
                 "--no-progress", "--out", str(out)]) == 0
    assert answered_configs(answer_requests(server)[before:]) == {"turns": 13}
    assert "turns: retrieval settings changed, 13 answers made again" in capsys.readouterr().err
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["complete"] is True and report["configs"]["turns"]["n"] == 13
    assert report["settings_by_config"]["turns"]["retrieval"]["speaker_boost"] == 0.7
    old_rows = {row["id"]: row for row in first["questions"]}
    for row in report["questions"]:  # the others are kept as they were, verdicts included
        for name in ("none", "vector"):
            assert row["answers"][name] == old_rows[row["id"]]["answers"][name]
        assert row["answers"]["turns"]["j"] is not None
    # the same settings again: nothing to do
    before = len(server.requests_to(OPENAI_CHAT))
    assert main(["--config", str(changed), "bench", "qa", "--data", str(DATA), "--configs", "none,vector,turns",
                 "--no-progress", "--out", str(out)]) == 0
    assert [kind_of(r) for r in server.requests_to(OPENAI_CHAT)[before:]] == ["probe"]
    # vector takes only its number of lines from the retrieval settings: top_k answers it again too
    capsys.readouterr()
    fewer = settings_file(tmp_path, server, "retrieval: {speaker_boost: 0.7, top_k: 3}\n")
    before = len(answer_requests(server))
    assert main(["--config", str(fewer), "bench", "qa", "--data", str(DATA), "--configs", "none,vector,turns",
                 "--no-progress", "--out", str(out)]) == 0
    assert answered_configs(answer_requests(server)[before:]) == {"vector": 13, "turns": 13}
    err = capsys.readouterr().err
    assert "vector: retrieval settings changed, 13 answers made again" in err and "none:" not in err


def test_redo_answers_one_configuration_again_with_its_verdicts(tmp_path, server, capsys):
    model = ScriptedModel()
    server.route(OPENAI_CHAT, model)
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out)) == 0
    first = json.loads(out.read_text(encoding="utf-8"))
    before = len(answer_requests(server))
    judged_before = sum(model.judged.values())
    capsys.readouterr()
    assert run_cli(tmp_path, server, "--out", str(out), "--redo", "vector") == 0
    assert answered_configs(answer_requests(server)[before:]) == {"vector": 13}
    assert "vector: --redo, 13 answers made again" in capsys.readouterr().err
    # vector's verdicts were made again too: its answers the rules leave to the LLM went to the judge
    # (an unreadable verdict is asked for twice)
    assert sum(model.judged.values()) - judged_before == sum(
        2 if row["answers"]["vector"].get("judge_unparsed") else 1
        for row in first["questions"] if row["answers"]["vector"]["judged_by"] == "llm")
    report = json.loads(out.read_text(encoding="utf-8"))
    old_rows = {row["id"]: row for row in first["questions"]}
    for row in report["questions"]:
        assert row["answers"]["none"] == old_rows[row["id"]]["answers"]["none"]
        assert row["answers"]["turns"] == old_rows[row["id"]]["answers"]["turns"]
    assert report["complete"] is True and report["configs"]["vector"]["n"] == 13


@pytest.mark.parametrize("redo,message", [("vector,mem0", "unknown configuration mem0 in --redo"),
                                          (",", "unknown configuration (none given) in --redo"),
                                          ("full", "--redo full: not in --configs none,vector,turns")])
def test_a_bad_redo_is_a_one_line_error_and_leaves_the_file(tmp_path, server, capsys, redo, message):
    server.route(OPENAI_CHAT, ScriptedModel())
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out)) == 0
    before, calls = out.read_bytes(), len(server.requests)
    capsys.readouterr()
    assert run_cli(tmp_path, server, "--out", str(out), "--redo", redo) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert out.read_bytes() == before and len(server.requests) == calls


def as_first_format(report: dict, retrieval_sha256: str | None = None) -> dict:
    """A report as the first format wrote it: the embedder's provider and model and a digest of the
    retrieval settings in the file-wide spec, no settings per configuration."""
    from memoryscope_plugins.bench.qa import _digest
    from memoryscope_plugins.settings import RetrievalSettings
    old = dict(report, format="memoryscope-bench-qa/1")
    del old["settings_by_config"]
    old["spec"] = {**report["spec"], "embedder": {"provider": "local", "model": None},
                   "retrieval_sha256": retrieval_sha256 or _digest(RetrievalSettings().model_dump(mode="json"))}
    return old


def test_a_file_of_the_first_format_continues(tmp_path, server, capsys):
    model = ScriptedModel(fail_answer_number=20)
    server.route(OPENAI_CHAT, model)
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out)) == 1  # stops part way, as a long run may
    partial = json.loads(out.read_text(encoding="utf-8"))
    out.write_text(json.dumps(as_first_format(partial)), encoding="utf-8")
    model.fail_answer_number = None
    before = len(answer_requests(server))
    capsys.readouterr()
    assert run_cli(tmp_path, server, "--out", str(out)) == 0
    assert len(answer_requests(server)) - before == 39 - 19  # only what was missing
    assert "made again" not in capsys.readouterr().err
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["format"] == "memoryscope-bench-qa/2" and report["complete"] is True
    assert set(report["settings_by_config"]) == {"none", "vector", "turns"}
    assert "retrieval_sha256" not in report["spec"]


def test_a_file_of_the_first_format_with_other_retrieval_settings_answers_those_again(tmp_path, server, capsys):
    server.route(OPENAI_CHAT, ScriptedModel())
    out = tmp_path / "qa.json"
    assert run_cli(tmp_path, server, "--out", str(out), "--top-k", "4") == 0
    first = json.loads(out.read_text(encoding="utf-8"))
    out.write_text(json.dumps(as_first_format(first, retrieval_sha256="0123456789abcdef")), encoding="utf-8")
    before = len(answer_requests(server))
    capsys.readouterr()
    assert run_cli(tmp_path, server, "--out", str(out), "--top-k", "4") == 0
    # with --top-k, vector does not depend on the retrieval settings
    assert answered_configs(answer_requests(server)[before:]) == {"turns": 13}
    assert "turns: retrieval settings changed, 13 answers made again" in capsys.readouterr().err
    # another embedder in the old spec: every configuration that embeds is answered again
    report = json.loads(out.read_text(encoding="utf-8"))
    old = as_first_format(report)
    old["spec"]["embedder"] = {"provider": "openai", "model": "text-embedding-3-small"}
    out.write_text(json.dumps(old), encoding="utf-8")
    before = len(answer_requests(server))
    assert run_cli(tmp_path, server, "--out", str(out), "--top-k", "4") == 0
    assert answered_configs(answer_requests(server)[before:]) == {"vector": 13, "turns": 13}
    assert "vector: embedder changed, 13 answers made again" in capsys.readouterr().err


# -- the rules for what the 1.5B judge got wrong most (made-up answers, English and Chinese) -----------------------


@pytest.mark.parametrize("answer,gold,question,expected", [
    # no answer: every question of categories 1-4 has one
    ("I don't know.", "Lisbon", "Where did Nora run?", (False, "no_answer")),
    ("The memories do not mention where she ran.", "Lisbon", "Where did Nora run?", (False, "no_answer")),
    ("I don't know the name of her rabbit.", "her rabbit Pepper", "What is the name of Nora's rabbit?",
     (False, "no_answer")),  # "rabbit" is the question's word, not an answer
    ("记忆中没有提到她搬去了哪里。", "杭州西湖边", "陈悦搬到了哪里？", (False, "no_answer")),
    ("不知道", "2024年7月13日", "陈悦什么时候去黄山的？", (False, "no_answer")),
    # a day without a year, at the precision both give
    ("2023-08-15", "Aug 15th", "", (True, "date")),
    ("August 15th", "Aug 15th", "", (True, "date")),
    ("16 August 2023", "Aug 15th", "", (False, "date_mismatch")),
    ("August 15", "15 August 2023", "", (True, "date")),
    ("August 16", "15 August 2023", "", (False, "date_mismatch")),
    ("2024年5月20日", "5月20日", "", (True, "date")),
    ("12月1日", "5月20日", "", (False, "date_mismatch")),
    ("5月20日", "2024年5月20日", "", (True, "date")),
    # several candidates offered
    ("14 April 2024 or 13 April 2024", "The sunday before 20 April 2024", "", (False, "several_candidates")),
    ("2 or 3 times", "three times", "", (False, "several_candidates")),
    ("三次或四次", "三次", "", (False, "several_candidates")),
    ("2024年7月13日或2024年7月14日", "2024年7月13日", "", (False, "several_candidates")),
    ("桂花茶", "桂花茶或大麦茶", "", (True, "in_gold_core")),  # the gold's own alternatives are no hedge
    # a yes/no gold answered the other way round
    ("Yes, he would go camping again soon.", "Likely no; the last trip went badly", "", (False, "yes_no_mismatch")),
    ("No, she would never say yes", "yes", "", (False, "yes_no_mismatch")),
    ("是的", "不去了，她已经换了工作。", "", (False, "yes_no_mismatch")),
    ("不会，她怕冷。", "会，她很喜欢滑雪。", "", (False, "yes_no_mismatch")),
    ("Yes", "Yes", "", (True, "exact")),
    # numbers
    ("2 weeks", "nearly three months", "", (False, "number_mismatch")),
    ("Two", "3", "", (False, "number_mismatch")),
    ("两次", "三次", "", (False, "number_mismatch")),
    ("3 children", "three", "", (True, "number")),
    ("3次", "三次", "", (True, "number")),
    ("Three months", "about 3 months", "", (True, "number")),
    ("三个月左右", "大约三个月", "", (True, "number")),
    # a gold of four words or more found whole in a longer answer
    ("Her favourite memory of the summer, which she often mentions, is baking bread with her grandmother "
     "in the old kitchen every Sunday morning before church, with flour everywhere.",
     "baking bread with her grandmother", "", (True, "contains")),
    ("她说那年夏天最难忘的，是每天傍晚在西湖边跑步，跑完再去吃一碗片儿川，然后慢慢走回家，一路上看着湖面上的灯光和来来往往的游船。",
     "在西湖边跑步", "", (True, "contains")),
    # a list gold: every item, or some but not all
    ("Bella, Rex and Coco", "Coco, Rex, Bella", "", (True, "list")),
    ("Rex and Coco", "Coco, Rex, Bella", "", (False, "list_partial")),
    ("散步、游泳和瑜伽", "游泳、瑜伽、散步", "", (True, "list")),
    ("游泳", "游泳、瑜伽、散步", "", (False, "list_partial")),
])
def test_rules_for_refusals_dates_candidates_polarity_numbers_phrases_and_lists(answer, gold, question, expected):
    verdict = deterministic_verdict(answer, gold, question)
    assert verdict is not None and (verdict.correct, verdict.rule) == expected


@pytest.mark.parametrize("answer,gold,question", [
    ("I'm not sure, but probably Lisbon", "Lisbon", ""),         # says it does not know, then gives the gold
    ("没有提到具体日期，可能是杭州西湖边", "杭州西湖边", ""),
    ("I don't know the name of her rabbit.", "her rabbit Pepper", ""),  # without the question "rabbit" is shared
    ("around mid-August", "Aug 15th", ""),                     # no day named
    ("August 2023", "Aug 15th", ""),                          # less precise than the gold
    ("the day after August 14", "Aug 15th", ""),              # relative
    ("8月", "5月20日", ""),
    ("Lisbon or Porto", "Lisbon", ""),                        # alternatives that are words: the LLM
    ("Yes, Melanie is an ally", "Yes, she is supportive", ""),  # the same way round: not decided by polarity
    ("是的，她是个顾家的人", "是。她想给父母换电梯房。", ""),
    ("Not really", "Yes", ""),
    ("12 weeks", "3 months", ""),                            # the same length in other units
    ("more than 2 years", "3 years", ""),                    # a bound, not a number
    ("between 2 and 4", "3", ""),                            # a range
    ("She did not go baking bread with her grandmother that year, although she had planned to.",
     "baking bread with her grandmother", ""),               # negated where the gold is not
    ("Her brother lives in Paris now, after many years in other cities around the country and abroad, "
     "and he likes it there very much.", "Paris", ""),       # a short gold in a long answer
    ("Running", "Coco, Rex, Bella", ""),                     # a list gold none of whose items is named
    ("Cats", "She has two cats, Coco and Rex", ""),          # a sentence, not a list
    ("跑步", "游泳、瑜伽、散步", ""),
])
def test_answers_the_new_rules_must_not_decide_go_to_the_llm(answer, gold, question):
    assert deterministic_verdict(answer, gold, question) is None
