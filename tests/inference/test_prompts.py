"""Specs for inference.prompts: prompts tokenize exactly as transformers would for the checkpoint."""

import shutil

import pytest

from inference.errors import PromptError
from inference.prompts import Prompt, build_prompt_ids, render_chat
from inference.tokenizer import Tokenizer

transformers = pytest.importorskip("transformers")

CODE = "import os\n\n\ndef main():\n    print(os.getcwd())  # 你好 🤗\n"
CHATS = [
    [{"role": "user", "content": "Write a quicksort in Python."}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi  there\n  indented"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b <|im_end|> c"},
     {"role": "user", "content": "emoji 🤗 and CJK 漢字"}],
]


@pytest.fixture(scope="module")
def tok(qwen_tok_dir):
    return Tokenizer.from_dir(qwen_tok_dir)


@pytest.fixture(scope="module")
def hf(qwen_tok_dir):
    return transformers.AutoTokenizer.from_pretrained(qwen_tok_dir)


def hf_chat_ids(hf, messages, **kw):
    out = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kw)
    return list(out["input_ids"] if not isinstance(out, list) else out)  # transformers 5 returns a BatchEncoding


def with_template(src, dst, template):
    shutil.copytree(src, dst)
    (dst / "chat_template.jinja").write_text(template)
    return Tokenizer.from_dir(dst)


@pytest.mark.parametrize("messages", CHATS)
def test_chat_ids_match_apply_chat_template(tok, hf, messages):
    assert build_prompt_ids(Prompt.chat(messages), tok) == hf_chat_ids(hf, messages)
    assert render_chat(tok, messages) == hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def test_chat_from_text_gets_default_system_prompt_and_generation_header(tok):
    text = render_chat(tok, Prompt.chat("hello").messages)
    assert text == ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                    "<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    ids = build_prompt_ids(Prompt.chat("hello"), tok)
    assert ids[0] == tok.token_id("<|im_start|>") and ids.count(tok.token_id("<|im_end|>")) == 2


def test_chat_system_argument_goes_first(tok, hf):
    p = Prompt.chat("hi", system="Be brief.")
    assert p.messages[0] == {"role": "system", "content": "Be brief."}
    assert build_prompt_ids(p, tok) == hf_chat_ids(hf, list(p.messages))


def test_render_without_generation_prompt(tok, hf):
    assert render_chat(tok, CHATS[0], add_generation_prompt=False) == hf.apply_chat_template(
        CHATS[0], add_generation_prompt=False, tokenize=False)


def test_template_features_match_transformers(qwen_tok_dir, tmp_path, hf):
    # bos_token is unset here: transformers leaves it undefined (renders ""), not "None".
    template = ("{{ bos_token }}{% for m in messages %}{% if loop.index > 5 %}{% break %}{% endif %}"
                "{{ m | tojson(indent=2) }}\n{{ m.content | tojson }}{{ eos_token }}\n{% endfor %}"
                "{% generation %}{{ 'gen' if add_generation_prompt }}{% endgeneration %}"
                "{{ tools is none }}{{ strftime_now('%Y') | length }}")
    tok = with_template(qwen_tok_dir, tmp_path / "m", template)
    messages = [{"role": "user", "content": "<b>\"quote\" 漢字 🤗</b>"}]
    expected = hf.apply_chat_template(messages, chat_template=template, add_generation_prompt=True, tokenize=False)
    assert render_chat(tok, messages) == expected
    assert "漢字" in expected and "<b>" in expected  # no ASCII / HTML escaping in tojson


def test_template_raise_exception_is_a_prompt_error(qwen_tok_dir, tmp_path):
    tok = with_template(qwen_tok_dir, tmp_path / "m",
                        "{% if messages[0].role != 'system' %}{{ raise_exception('System first!') }}{% endif %}")
    with pytest.raises(PromptError, match="System first!"):
        build_prompt_ids(Prompt.chat("hi"), tok)


def test_broken_template_is_a_prompt_error(qwen_tok_dir, tmp_path):
    tok = with_template(qwen_tok_dir, tmp_path / "m", "{% for m in messages %}")
    with pytest.raises(PromptError, match="not valid Jinja"):
        render_chat(tok, CHATS[0])


def test_chat_without_template_is_a_prompt_error(bos_tok_dir):
    with pytest.raises(PromptError, match="no chat template"):
        build_prompt_ids(Prompt.chat("hi"), Tokenizer.from_dir(bos_tok_dir))


def test_completion_ids_match_transformers(qwen_tok_dir, bos_tok_dir):
    for d in (qwen_tok_dir, bos_tok_dir):
        tok, ref = Tokenizer.from_dir(d), transformers.AutoTokenizer.from_pretrained(d)
        for text in (CODE, "  two leading spaces", "x"):
            assert build_prompt_ids(Prompt.completion(text), tok) == ref(text)["input_ids"]
    bos = Tokenizer.from_dir(bos_tok_dir)
    assert build_prompt_ids(Prompt.completion("x"), bos)[0] == bos.bos_token_id


def test_fim_layout_matches_transformers_with_single_special_ids(tok, hf):
    prefix, suffix = "def add(a, b):\n    ", "\n\nprint(add(1, 2))\n"
    ids = build_prompt_ids(Prompt.fim(prefix, suffix), tok)
    assert ids == hf(f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>")["input_ids"]
    p, s, m = (tok.token_id(t) for t in ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"))
    assert ids[0] == p and ids[-1] == m and ids.count(s) == 1
    assert ids == [p, *tok.encode(prefix, False), s, *tok.encode(suffix, False), m]


def test_fim_with_only_a_prefix(tok):
    ids = build_prompt_ids(Prompt.fim("x = ", None), tok)
    assert tok.decode(ids) == "<|fim_prefix|>x = <|fim_suffix|><|fim_middle|>"


def test_fim_on_a_model_without_fim_tokens_is_a_prompt_error(bos_tok_dir):
    with pytest.raises(PromptError, match="no fill-in-the-middle tokens"):
        build_prompt_ids(Prompt.fim("a", "b"), Tokenizer.from_dir(bos_tok_dir))


def test_ids_prompt_passes_through_and_is_range_checked(tok):
    assert build_prompt_ids(Prompt.from_ids([1, 2, 4095]), tok) == [1, 2, 4095]
    with pytest.raises(PromptError, match="out of range"):
        build_prompt_ids(Prompt.from_ids([1, 4096]), tok)
    for bad in ([-1], [1.5], ["3"], [True]):
        with pytest.raises(PromptError, match="non-negative integers"):
            Prompt.from_ids(bad)


@pytest.mark.parametrize("make", [
    lambda: Prompt.completion(""),
    lambda: Prompt.from_ids([]),
    lambda: Prompt.chat(""),
    lambda: Prompt.chat([]),
    lambda: Prompt.fim("", ""),
    lambda: Prompt("poem", text="x"),
], ids=["completion", "ids", "chat-text", "chat-list", "fim", "bad-mode"])
def test_empty_or_malformed_prompts_are_prompt_errors(make):
    with pytest.raises(PromptError):
        make()


def test_malformed_chat_messages_are_prompt_errors():
    with pytest.raises(PromptError, match="message 1"):
        Prompt.chat([{"role": "user", "content": "a"}, {"role": "user"}])
    with pytest.raises(PromptError, match="system message"):
        Prompt.chat([{"role": "system", "content": "a"}], system="b")


LLAMA3_STYLE_TEMPLATE = (
    "{{- bos_token }}\n"
    "{%- if not date_string is defined %}{%- set date_string = strftime_now('%d %b %Y') %}{%- endif %}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set system_message = '' %}\n"
    "{%- endif %}\n"
    "{{- '<|im_start|>system\\n' + 'Today Date: ' + date_string + '\\n\\n' + system_message + '<|im_end|>' }}\n"
    "{%- for message in messages %}\n"
    "    {{- '<|im_start|>' + message['role'] + '\\n\\n' + message['content'] | trim + '<|im_end|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n\\n' }}\n"
    "{%- endif %}\n"
)


def test_bos_in_the_template_is_encoded_once(bos_tok_dir, tmp_path):
    # Llama-3 templates start with {{ bos_token }}; chat text is encoded without the
    # post-processor's BOS, so the prompt has exactly one.
    tok = with_template(bos_tok_dir, tmp_path / "m", LLAMA3_STYLE_TEMPLATE)
    ref = transformers.AutoTokenizer.from_pretrained(bos_tok_dir)
    messages = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "def f():\n  pass"}]
    ids = build_prompt_ids(Prompt.chat(messages), tok)
    assert ids == hf_chat_ids(ref, messages, chat_template=LLAMA3_STYLE_TEMPLATE)
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
