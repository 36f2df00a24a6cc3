"""Machine-translate the questions of a LoCoMo-format file, for the cross-lingual benchmark.

    python bench/translate_questions.py IN.json OUT.json --to Chinese [--conversations 1]
        [--base-url http://127.0.0.1:8081/v1] [--model qwen2.5-coder-1.5b-instruct]

One question per call to any OpenAI-compatible endpoint (the local LLM of
../shared/tools/local-llm by default), with a one-shot example so a small model translates
instead of answering. The memories are left as they are; each translated question keeps its
original under ``question_original``. The output is evaluation data: keep it out of the package.
Then: ``memoryscope-plugins bench locomo --data OUT.json``.
"""

from __future__ import annotations

import argparse
import json

# no person in the example: a small model copies an example's name into its translations
EXAMPLES = {
    "Chinese": ("What time does that restaurant close?", "那家餐厅几点关门？"),
    "English": ("那家餐厅几点关门？", "What time does that restaurant close?"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--to", choices=sorted(EXAMPLES), required=True)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--base-url", default="http://127.0.0.1:8081/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    args = parser.parse_args()

    from openai import OpenAI
    client = OpenAI(base_url=args.base_url, api_key="local", timeout=600)
    example_in, example_out = EXAMPLES[args.to]
    system = (f"You are a translator. Translate the user's text into {args.to}. Never answer it, never explain: "
              "output the translation only. Keep personal names as they are.")
    with open(args.source, encoding="utf-8") as handle:
        data = json.load(handle)[:args.conversations]
    for conversation in data:
        for qa in conversation["qa"]:
            answer = client.chat.completions.create(
                model=args.model, temperature=0, max_tokens=120,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": example_in},
                          {"role": "assistant", "content": example_out}, {"role": "user", "content": qa["question"]}])
            qa["question_original"] = qa["question"]
            qa["question"] = (answer.choices[0].message.content or "").strip() or qa["question"]
    with open(args.target, "w", encoding="utf-8") as handle:
        json.dump(data, handle, ensure_ascii=False, indent=1)
    print(f"translated {sum(len(c['qa']) for c in data)} questions -> {args.target}")


if __name__ == "__main__":
    main()
