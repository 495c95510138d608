"""What a harness module may import from inside ``liyuan`` besides the facade, and why.

Read by ``tests/harness/test_one_path.py``. The facade is what ``liyuan`` exports
(``liyuan.__all__``), imported from ``liyuan`` or ``liyuan.app``; a facade name imported
from its home module is the same object and needs no entry, except :data:`LAYER_CLASSES`,
which the app reaches only through a :class:`liyuan.Card`. Every other name below is an
inner function, class or constant, with the reason the harness may use it. A name not
listed here fails the guard; a listed name nothing imports any more fails it too.
"""

from __future__ import annotations

LAYER_CLASSES = frozenset({"CardMemory"})
"""Facade names that build a layer the app only ever gets from a card (``card.memory``)."""

_FORMAT = ("常量和格式标记：评测、检查和占位回复按库的格式读写产物（标题、条目类型、文件名、默认值），"
           "不调用任何一层")
_TOOLS = "纯工具：计数、确定的时钟和 id、原子写文件、哈希；不碰记忆"
_READERS = ("只读的解析和校验：评分卡和检查用库自己的规矩判断产物（五节摘要、合并结果、会话条目、账本），"
            "不写任何东西")
_PROMPTS = "模版覆盖和复查：列出、观察模版的渲染（harness check 的覆盖一栏、review）；对照方案用同一个渲染器"
_BASELINE = ("对照方案（通用 agent 压缩、截断窗口、长对话策略对比）不是梨园的路径：在一棵会话树上照同行的做法实现，"
             "和经 Chat 的我们的策略并排比较；scenario 的开场白和导入的戏外消息也写在局自己的树上")
_VECTOR = ("只测或只演示向量/设定集这一层：召回质量、延迟、两种存储后端、设定集激活的基准，"
           "和 recall 步骤（只取当前分支，不经一轮 prepare）")
_ONE_LAYER = ("只演示一层的步骤：fit（常驻摘要的预算）、discussion（讨论区压缩）、edit_memory（手改记忆的硬路径）、"
              "设定集宏；每一步的说明都写明它只演示这一层")
_IMPORT = "导入工具：把外部聊天记录和角色卡转成场景文件，用库自己的读取器，读法和 app 导入一致"
_LONG = ("harness/bench/long.py 和 longchat.py 量长对话和同步随规模增长的用时：直接搭出卡目录（10 万轮的会话文件、"
         "几百局复盘和它们的 Manifest），不演这么多轮；量的仍是 Card 打开之后的路径")


def _all(reason: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, reason)


ALLOWED: dict[str, str] = {
    **_all(_FORMAT,
           "liyuan.card.prompts.HANDBOOK_MARK", "liyuan.card.prompts.RECAP_HEADINGS",
           "liyuan.card.prompts.RESIDENT_HEADING", "liyuan.card.prompts.RESIDENT_MARK",
           "liyuan.context.assemble.SUMMARY_OPENING", "liyuan.context.budget.OMITTED_MARKER",
           "liyuan.context.budget.RESIDENT_ENVELOPE_CHARS", "liyuan.context.budget.RESIDENT_MAX_CHARS",
           "liyuan.context.budget.RESIDENT_MIN_USEFUL_CHARS", "liyuan.discussion.messages.KEEP_RECENT_TOKENS",
           "liyuan.discussion.messages.RESERVE_TOKENS", "liyuan.lore.LORE_FILE", "liyuan.lore.containers.PNG_SIGNATURE",
           "liyuan.lore.store.CACHE_FILE", "liyuan.session.entries.IMPORT_NOTE_TYPE",
           "liyuan.session.entries.SESSION_VERSION", "liyuan.session.imports.FORMATS",
           "liyuan.session.state.STATE_ENTRY_TYPE", "liyuan.storage.devserver.DSN_ENV",
           "liyuan.storage.folder.VECTOR_STORE_FILE", "liyuan.story.compact.DEFAULT_EVERY_N_TURNS",
           "liyuan.story.compact.KEEP_RECENT_TURNS", "liyuan.story.compact.MIN_COMPACT_CHARS",
           "liyuan.story.scribe.SUMMARY_HEADINGS", "liyuan.story.view.LEGACY_COMPACTION_TYPE",
           "liyuan.story.view.SUMMARY_ENTRY_TYPE", "liyuan.vector.chunking.ARCHIVE_CHUNK_CHARS",
           "liyuan.vector.config.EXTERNAL", "liyuan.vector.config.MAX_CHUNKS", "liyuan.vector.config.NARRATIVE",
           "liyuan.vector.recall.RECALL_TIMEOUT_S"),
    **_all(_TOOLS,
           "liyuan.card.files.write_memory_file", "liyuan.card.files.sha1_text", "liyuan.clock.IdFactory",
           "liyuan.clock.counter_ids", "liyuan.clock.fixed_clock", "liyuan.fileio.atomic_write_bytes",
           "liyuan.fileio.atomic_write_text", "liyuan.text.utf16_len", "liyuan.text.utf16_prefix",
           "liyuan.tokens.chars4", "liyuan.tokens.estimate_tokens"),
    **_all(_READERS,
           "liyuan.bounds.check_reply_size", "liyuan.card.prompts.parse_merge_result",
           "liyuan.model.split_reasoning", "liyuan.prompts.echoed_tag", "liyuan.session.entries.Entry",
           "liyuan.session.entries.args_json", "liyuan.session.entries.is_message",
           "liyuan.session.entries.last_usage", "liyuan.session.entries.thinking",
           "liyuan.session.entries.tool_calls", "liyuan.session.state.format_roster",
           "liyuan.session.state.format_state", "liyuan.session.state.state_from_branch",
           "liyuan.story.compact.CompactionPlan", "liyuan.story.history.active_summary",
           "liyuan.story.scribe.validate_summary"),
    **_all(_PROMPTS,
           "liyuan.prompts.Prompt", "liyuan.prompts.environment", "liyuan.prompts.neutralize",
           "liyuan.prompts.observe_renders", "liyuan.prompts.render", "liyuan.prompts.template_names"),
    **_all(_BASELINE, "liyuan.model.side_call", "liyuan.session.tree.SessionTree"),
    **_all(_VECTOR,
           "liyuan.app.recall.recall_with_trace", "liyuan.lore.activate.lore_for_turn",
           "liyuan.lore.activate.lore_share_chars", "liyuan.lore.load_book", "liyuan.lore.match.LoreIndex",
           "liyuan.lore.model.regex_key", "liyuan.lore.save_book", "liyuan.storage.copy_card",
           "liyuan.storage.devserver.PostgresUnavailable", "liyuan.storage.devserver.start_postgres",
           "liyuan.storage.pgchunks.PostgresChunkStore", "liyuan.storage.pgdb.PostgresDatabase",
           "liyuan.vector.ChunkStore", "liyuan.vector.E5Embedder", "liyuan.vector.Embedder",
           "liyuan.vector.HashEmbedder", "liyuan.vector.SemanticEmbedder", "liyuan.vector.SqliteChunkStore",
           "liyuan.vector.StoreConfig", "liyuan.vector.VectorMemory", "liyuan.vector.chunking.split_text_chunks",
           "liyuan.vector.chunkstore.NewChunk", "liyuan.vector.config.RecallMode",
           "liyuan.vector.embed.HashEmbedder", "liyuan.vector.embed.embed_query", "liyuan.vector.lexical.BM25Index",
           "liyuan.vector.lexical.ENGLISH_STOPWORDS", "liyuan.vector.lexical.Encoded",
           "liyuan.vector.lexical.bigram_terms", "liyuan.vector.lexical.has_cjk", "liyuan.vector.lexical.latin_term",
           "liyuan.vector.recall.bounded_archive", "liyuan.vector.recall.branch_ids_of",
           "liyuan.vector.recall.recall_for_turn", "liyuan.vector.search.Fusion",
           "liyuan.vector.search.on_current_branch",
           "liyuan.vector.store.SqliteChunkStore"),
    **_all(_ONE_LAYER,
           "liyuan.card.memstore.MemoryStore", "liyuan.context.budget.fit_resident_summary",
           "liyuan.context.budget.resident_allowance", "liyuan.discussion.compact.run_discussion_compaction",
           "liyuan.discussion.messages.AgentMessage", "liyuan.discussion.messages.agent_history",
           "liyuan.discussion.messages.estimate_message_tokens", "liyuan.lore.LoreReport",
           "liyuan.lore.model.substitute_macros"),
    **_all(_IMPORT,
           "liyuan.lore.cards.ImportedCard", "liyuan.lore.cards.read_card", "liyuan.session.imports.ChatReader",
           "liyuan.session.imports.ChatSource", "liyuan.session.imports.ImportedMessage",
           "liyuan.session.imports.import_chat", "liyuan.session.imports.safe_chat_id",
           "liyuan.session.imports.safe_folder_name"),
    **_all(_LONG,
           "liyuan.card.layout.CardLayout", "liyuan.card.files.MemoryFiles", "liyuan.card.manifest.Manifest",
           "liyuan.card.manifest.save_manifest", "liyuan.card.sessions.source_mark_of"),
    "liyuan.vector.chunking.ARCHIVE_OVERLAP": ("公开数据评测（harness/eval/public.py）照库自己的切块规矩"
                                               "把 LoCoMo 的一段存成归档块：块长和重叠取库里的常量，不另定一套"),
    "liyuan.card.handbook.assemble_handbook": ("评分卡照库的拼法把合并回复（只写这一批的块和跨局汇总）拼成整本手册，"
                                               "再按手册的规矩打分；只读，不写记忆文件"),
    "liyuan.story.view.story_view": ("edit_turn / delete_turn 步骤按库读故事的方式数轮次，"
                                     "找出第 N 轮的回复再经 chat.edit / chat.delete 改它；只读"),
    **_all("置顶步骤把卡和局带着的置顶按一轮里发出去的样子写成产物，并写明份额怎么算（pin_share）；只读，置顶本身经 "
           "chat.pin / card.pin 写",
           "liyuan.context.pins.Pin", "liyuan.context.pins.pin_share_chars", "liyuan.context.pins.pins_text"),
    "liyuan.card.sync.CardMemory": ("harness/bench/long.py 量一次无事可做的同步（card.memory.sync）随局数的用时："
                                    "单独搭出记忆层跑同步，不开 Card、不开局，量的只是记忆层本身；"
                                    "app 里只从 card.memory 拿到它"),
}
"""``module.name`` -> why a harness module may import it from inside the library."""
