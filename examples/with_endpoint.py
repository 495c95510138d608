"""A real side model: any OpenAI-compatible endpoint (not run in CI: no model runs there).

Run it::

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=... \\
        python examples/with_endpoint.py <side-model-name> [<role-play-model-name>]

The side model writes the relay summaries, recaps and the handbook; the role-play model
(the same one when no second name is given) answers the turns. Everything written to
``cards/`` is then real model output, and the files record which model wrote it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from liyuan import Card, ChatMessage, ModelRequest, OpenAIModel

SYSTEM = "你是林溯，雾港灯塔的守灯人。话少、嘴硬，用第二人称描写阿简。只写林溯这一方的言行。"


def main(side_name: str, play_name: str) -> None:
    # --8<-- [start:endpoint]
    side = OpenAIModel(model=side_name)                 # OPENAI_BASE_URL / OPENAI_API_KEY from the environment
    player = OpenAIModel(model=play_name, temperature=0.8)
    with Card.open(Path("cards") / "雾港", side_model=side, user_name="阿简", char_name="林溯",
                   on_activity=lambda a: print(f"  · {a.text}", file=sys.stderr)) as card:
        chat = card.chat("jA", greeting="铁门外起了大雾。")
        while (words := input("阿简> ").strip()) not in ("", "/quit"):
            turn = chat.prepare(words)
            messages = (ChatMessage("system", SYSTEM), *turn.messages)
            reply = player.complete(ModelRequest(messages, purpose="roleplay", max_tokens=800))
            print(f"林溯> {reply.text}")
            chat.record(reply.text, usage=reply.usage)
    # --8<-- [end:endpoint]


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("用法：python examples/with_endpoint.py <旁路模型名> [<扮演模型名>]")
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else sys.argv[1])
