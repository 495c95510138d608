"""A deterministic long Chinese role-play chat for the strategy comparison.

Invariant: :func:`generate_chat` is a pure function of ``(beats, seed)``: every choice
comes from a SHA-256 of the seed and the slot (not from :mod:`random`, whose algorithms
may change between Python versions), so the same arguments give the same text on every
machine. Every sentence below was written by hand for this project; nothing is model
output.

The chat: the painter 沈砚 (the user) stays at 苏蘅's inn in 青石镇 and travels the
county with her. Each beat is one user line and one reply, about 500 characters together.
The story moves through scenes (a place and a day) every 40-60 beats, plants one-off
facts (names, objects and who holds them, promises, open threads, numbers) on fixed
beats, and has one reroll: the first reply of :attr:`SynthChat.reroll_beat` is swiped
and replaced (the swiped reply names a fact that must not survive on the branch).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .checks import Fact, parse_match

__all__ = ["LEDGER_KEEP", "PLANTED", "Plant", "SynthBeat", "SynthChat", "generate_chat"]

LEDGER_KEEP = 4
"""Items and threads the synthetic ledger keeps (oldest fall off)."""
USER = "沈砚"
CHAR = "苏蘅"
GREETING = ("（青石镇的雨下了三天。客栈的门帘一掀，一个背着画箱的年轻人带进一股潮气。柜台后的女人抬起头，"
            "拨了一下算盘珠子。）客官住店？楼上还剩一间，临河，夜里吵。我是这里的掌柜，姓苏。")

_PLACES = [
    ("青石镇客栈", "客栈"), ("镇外渡口", "渡口"), ("半山的寒山寺", "寒山寺"), ("城南集市", "集市"),
    ("回春药铺", "药铺"), ("后山竹林", "竹林"), ("城隍庙前", "城隍庙"), ("河下游的码头", "码头"),
    ("县城书院", "书院"), ("山脚茶寮", "茶寮"), ("古驿道上的凉亭", "凉亭"), ("湖心的白鹭洲", "白鹭洲"),
    ("盐仓街", "盐仓"), ("废弃的烽火台", "烽火台"),
]

_TIMES = ["清晨", "上午", "正午", "午后", "黄昏", "入夜", "深夜"]

_USER_ACTIONS = [
    "我把湿了的外衣搭在椅背上，搓了搓冻僵的手。",
    "我蹲下来系紧鞋带，抬头看见她已经走出去好几步了，赶紧跟上。",
    "我把速写本夹在胳膊底下，另一只手提着刚买的两包点心。",
    "我靠着门框站了一会儿，看街上的人来来往往。",
    "我把铅笔别在耳后，伸手接住从屋檐落下来的一滴雨。",
    "我打了个喷嚏，惹得旁边卖菜的大娘笑了起来。",
]

_USER_LINES = [
    "我把画箱放下，问{char}：“{place}这一带，平常都是这么安静吗？”",
    "我摊开速写本，照着{place}的样子描了几笔，顺口问她今天还要忙什么。",
    "我跟在{char}身后，看她和路边的人打招呼，忍不住问那是谁。",
    "我给{char}递过去一碗热茶：“歇一会儿吧，从早上到现在你就没坐下过。”",
    "我指着远处的山影问：“那边是什么地方？明天能去看看吗？”",
    "我把刚画好的一张递给{char}看：“你觉得像不像？”",
    "我帮{char}把东西搬上车，随口说起小时候在江南学画的事。",
    "我学着{char}的口气跟掌柜讨价还价，结果被她在桌下踢了一脚。",
    "我问{char}：“你在青石镇住了多少年了？一直是一个人打理客栈吗？”",
    "我坐在台阶上削铅笔，听{char}讲这附近的旧事。",
]

_REPLY_OPENERS = [
    "（{char}把袖子挽到肘弯，头也不抬。）",
    "（{char}停下手里的活，朝你看了一眼，眼角带着一点笑。）",
    "（{char}把算盘往怀里一揣，拍了拍衣襟上的灰。）",
    "（{char}正和旁人说着话，听见你问，转过头来。）",
    "（{char}把碗接过去，吹了吹热气，没急着喝。）",
    "（{char}眯着眼看了看天色，又看了看你。）",
]

_REPLY_BODIES = [
    "{place}这地方，看着冷清，其实一天到晚都有人来来去去，只是不爱说话。你住久了就知道，谁家几口人、谁欠谁几文钱，镇上没有秘密。",
    "画画的人眼睛毒，我晓得。可你别光盯着好看的地方画，墙根底下那些晒太阳的老头，比山水有意思多了。",
    "今天的活不多：对一遍账，去河边收两只腌菜坛子，晚上给楼上的客人烧水。你要是闲，就帮我劈点柴，省得你在屋里闷出病来。",
    "那是卖豆腐的王家嫂子，嘴碎，心不坏。你以后见了她，叫一声嫂子，她能多给你一块豆腐干。",
    "山那边的路不好走，下过雨更难。真想去，明天起早，带上干粮和蓑衣，我让伙计给你指路。",
    "像是像，就是把我画得太老实了。（她用指尖点了点纸上的眉眼）这里，再凶一点才对。",
    "江南好啊，水软，人也软。不像这儿，石头硬，风也硬，连说话都带着棱角。",
    "你这砍价的本事，是跟谁学的？再这么砍，人家下回见了我们就关门了。",
    "十来年了吧。起先是帮我娘，后来就剩我一个。客栈不大，一个人也撑得住，就是夜里冷清些。",
    "这附近的旧事，讲三天三夜也讲不完。你要听，我就挑不吓人的讲，免得你夜里不敢出门解手。",
]

_SCENERY = [
    "{when}的{place}，檐下挂着一排风干的腊鱼，水汽顺着瓦沟往下滴，滴在石阶上，一声一声的。",
    "{place}的风里有股柴烟味，几个挑夫蹲在墙根下分一块烙饼，看见你们过来，都往边上让了让。",
    "{when}，{place}的天色灰里透着一点亮，远处有狗叫了两声，又停了，像是被谁喝住了。",
    "{place}门口的石狮子缺了半只耳朵，有个小孩骑在它背上，手里攥着一根糖葫芦，吃得满脸都是。",
    "路边的野菊开得正旺，{place}那头传来几声吆喝，听不清卖的是什么，只听得出嗓子是哑的。",
    "{when}的光斜斜地照进来，把地上的青砖照出一道一道的裂纹，灰尘在光里慢慢地浮着。",
    "{place}这边比镇上凉，草叶上还挂着露水，鞋面没走几步就湿透了，凉意顺着脚踝往上爬。",
    "隔壁铺子的伙计在门口泼水，水花溅到你的衣角，他连声赔不是，{char}摆摆手，说不碍事。",
]

_REPLY_MORE = [
    "你也别光听我说，多看，多记，哪天你要是走了，这些东西也能跟着你的画走。",
    "我这人说话直，你别往心里去。客栈里南来北往的人多了，我见得多，话也就糙了。",
    "这年头，能安安稳稳吃一碗热饭就算好日子。你是读过书的人，大概不这么想。",
    "等忙完这一阵，我带你去吃镇东头的羊肉汤，那家的汤熬了二十年，从没熄过火。",
    "你画里的人都太干净了。真在这儿过日子的人，手上有茧，脸上有灰，你得把这些也画进去。",
    "有些事我现在不说，不是防着你，是还没到说的时候。你先记着，我早晚会告诉你。",
    "外头的人都说我们这儿穷，可穷有穷的过法。你在这儿住上一年，就不想走了。",
    "算了，不说这个。你饿不饿？灶上还温着半锅粥，我给你盛一碗。",
]

_REPLY_CLOSERS = [
    "（她说完就转身走了，走出几步又回头补了一句）别忘了把门带上。",
    "（风从巷口灌进来，她把领口拢了拢）走吧，天要变了。",
    "（她把茶碗放回你手里，碗底还是温的。）",
    "（远处有人喊她，她应了一声，把话头收住了。）",
    "（她把一缕被风吹乱的头发别回耳后，没再说话。）",
    "（她伸了个懒腰，骨节咔咔作响）今天就到这儿。",
]

class Plant(NamedTuple):
    """One planted fact: said once, on its beat, inside the reply."""

    beat: int
    id: str
    kind: str
    section: str
    sentence: str
    match: tuple[str, ...]
    ledger: str = ""
    """What the ledger records for it (items or threads); empty: the ledger never says it."""


PLANTED: tuple[Plant, ...] = (
    Plant(7, "silver-pin", "holder", "事实账",
          "（她从发间拔下一枚刻着“蘅”字的银簪，塞进你手心）替我收着，哪天我要回来，你再还我。", ("银簪",),
          "苏蘅的银簪（沈砚收着）"),
    Plant(19, "boatman", "name", "人物", "渡口撑船的是老周，一只耳朵不好使，跟他说话要站在他左边。", ("老周",)),
    Plant(33, "debt", "fact", "事实账", "你记着，药铺的韩大夫还欠客栈三十七文房钱，年底前得讨回来。", ("三十七文",),
          "韩大夫欠房钱三十七文"),
    Plant(48, "ferry-promise", "promise", "承诺与伏笔", "第十天黄昏，我在渡口等你，到时候你把那幅画带来。",
          ("第十天", "渡口"), "第十天黄昏渡口之约"),
    Plant(64, "sealed-letter", "thread", "承诺与伏笔",
          "柜台底下压着一封火漆封口的信，收信人的名字被雨水洇没了，我一直没敢拆。", ("火漆",)),
    Plant(89, "pipa", "object", "事实账", "墙上那把断了一根弦的琵琶是我娘留下的，谁都不许碰。", ("琵琶",)),
    Plant(113, "storyteller", "name", "人物", "城隍庙前说书的柳七，其实是我表舅，只是他不认我们这门亲。",
          ("柳七",)),
    Plant(141, "tea-cup", "holder", "事实账", "这只青瓷茶盏你拿去，就当是我押在你那儿的，丢了可要赔。",
          ("青瓷茶盏|青瓷盏",), "青瓷茶盏（沈砚收着）"),
    Plant(167, "map-promise", "promise", "承诺与伏笔", "等你画完这一带的地图，送我一份，我挂在柜台后头。",
          ("地图",), "画完地图送苏蘅一份"),
    Plant(190, "fever", "fact", "事实账", "你昨夜发的那场烧，是韩大夫开的三副药压下去的，剩下一副还在灶台上。",
          ("三副药",)),
    Plant(214, "lost-brother", "thread", "承诺与伏笔",
          "我有个弟弟，七年前跟着盐船走了，再没回来过。这事你别跟旁人提。", ("弟弟", "盐船")),
    Plant(262, "jade-seal", "holder", "事实账", "县衙的刘主簿把一方青玉印章押在客栈，说是抵三个月的饭钱。",
          ("青玉印章|青玉印",), "刘主簿押的青玉印章"),
    Plant(301, "heron-vow", "promise", "承诺与伏笔", "你答应过我，冬至那天陪我去白鹭洲放河灯，可别忘了。",
          ("冬至", "河灯"), "冬至陪苏蘅去白鹭洲放河灯"),
    Plant(339, "well-secret", "thread", "承诺与伏笔",
          "后院那口枯井，井壁上有人刻了一行字，我看不懂，你是读书人，改天帮我认认。", ("枯井",)),
    Plant(377, "horse-name", "name", "人物", "那匹瘦马叫踏雪，是镖局的赵镖头寄养在这儿的，他说开春就来领。",
          ("踏雪",)),
    Plant(412, "salt-tax", "fact", "事实账", "今年盐价涨到一斗一百二十文，镇上好几家都吃不起咸菜了。",
          ("一百二十文",)),
    Plant(449, "painting-debt", "promise", "承诺与伏笔", "你欠我一幅画，画客栈门口那棵老槐树，说好了下雪前给我。",
          ("老槐树",), "下雪前画老槐树给苏蘅"),
    Plant(488, "inkstone", "holder", "事实账", "书院的孟先生托我转交你一方端砚，说是谢你替他抄了半本书。",
          ("端砚",), "孟先生送的端砚（沈砚收着）"),
    Plant(521, "signal-fire", "thread", "承诺与伏笔", "昨夜烽火台上亮过一次火光，守台的兵早就撤了，不知道是谁点的。",
          ("火光",)),
    Plant(556, "ledger-key", "holder", "事实账", "账房的钥匙我交给你了，我不在的时候，你替我看着柜台。",
          ("账房的钥匙|账房钥匙",), "账房的钥匙（沈砚收着）"),
)

SWIPED_FACT = ("swiped-spy", "（她压低声音）我其实是州府派来的暗探，开客栈只是个幌子。", ("暗探",))
"""Said only in the swiped reply: once the reroll lands, nothing on the branch may say it."""


@dataclass(frozen=True)
class SynthBeat:
    """One beat: the user's line, the reply kept on the branch, the ledger after it."""

    number: int
    user: str
    reply: str
    ledger: Mapping[str, Any]
    swiped_reply: str | None = None
    """At the reroll beat: the first reply, written and then swiped away."""


@dataclass(frozen=True)
class SynthChat:
    """The whole generated chat with what it planted."""

    user_name: str
    char_name: str
    greeting: str
    beats: tuple[SynthBeat, ...]
    facts: tuple[Fact, ...]
    """Planted facts, each with the beat that says it (once)."""
    scenes: tuple[Fact, ...]
    """Scenes in order; ``beat`` is where each begins (0: the greeting's)."""
    swiped: Fact
    """The fact said only by the swiped reply."""
    reroll_beat: int


def _pick(pool: Sequence[str], seed: int, *slot: object) -> str:
    digest = hashlib.sha256(f"{seed}:{':'.join(map(str, slot))}".encode()).digest()
    return pool[int.from_bytes(digest[:8], "big") % len(pool)]


def _distinct(pool: Sequence[str], k: int, seed: int, *slot: object) -> list[str]:
    """``k`` different items of ``pool``: a picked start, then every other item from there."""
    start = pool.index(_pick(pool, seed, *slot))
    return [pool[(start + 2 * i + i // len(pool)) % len(pool)] for i in range(k)]


def _number(seed: int, low: int, high: int, *slot: object) -> int:
    digest = hashlib.sha256(f"{seed}:n:{':'.join(map(str, slot))}".encode()).digest()
    return low + int.from_bytes(digest[:8], "big") % (high - low + 1)


def _scene_starts(beats: int, seed: int) -> list[int]:
    starts = [0]
    while True:
        nxt = starts[-1] + _number(seed, 40, 60, "scene", len(starts))
        if nxt > beats:
            return starts
        starts.append(nxt)


def generate_chat(beats: int = 600, seed: int = 7, reroll_beat: int = 246) -> SynthChat:
    """Generate the chat.

    Args:
        beats: Number of beats (at least 60, so a few scenes and facts fit).
        seed: Varies the filler; planted facts and the reroll stay on their beats.
        reroll_beat: The beat whose first reply is swiped (``0``: no reroll).

    Raises:
        ValueError: ``beats`` below 60 or ``reroll_beat`` outside the chat.
    """
    if beats < 60:
        raise ValueError("合成对话至少要 60 轮")
    if not 0 <= reroll_beat <= beats:
        raise ValueError(f"重来的轮次 {reroll_beat} 不在 1..{beats} 之内")
    starts = _scene_starts(beats, seed)
    planted = {p.beat: p for p in PLANTED if p.beat <= beats}
    facts = tuple(Fact(p.id, p.sentence, parse_match(p.match), chat="synth", beat=p.beat, kind=p.kind,
                       section=p.section) for p in planted.values())
    scenes = tuple(
        Fact(f"scene-{i}", _PLACES[i % len(_PLACES)][0], parse_match([_PLACES[i % len(_PLACES)][1]]),
             chat="synth", beat=start, kind="scene")
        for i, start in enumerate(starts))
    out: list[SynthBeat] = []
    items: list[str] = []
    threads: list[str] = []
    for n in range(1, beats + 1):
        scene = max(i for i, start in enumerate(starts) if start <= n)
        place, _token = _PLACES[scene % len(_PLACES)]
        day = 1 + (n - 1) // 8
        when = f"第{day}天{_TIMES[(n - 1) % len(_TIMES)]}"
        first = n in starts
        user = (_pick(_USER_ACTIONS, seed, "a", n)
                + _pick(_USER_LINES, seed, "u", n).format(char=CHAR, place=place))
        if first:
            user = f"（{when}，我们来到{place}。）" + user
        bodies = _distinct(_REPLY_BODIES, 2, seed, "b", n)
        scenery = _distinct(_SCENERY, 2, seed, "s", n)
        more = _distinct(_REPLY_MORE, 2, seed, "m", n)
        parts = [_pick(_REPLY_OPENERS, seed, "o", n).format(char=CHAR),
                 bodies[0].format(place=place), scenery[0].format(place=place, when=when, char=CHAR), more[0],
                 bodies[1].format(place=place), scenery[1].format(place=place, when=when, char=CHAR)]
        plant = planted.get(n)
        if plant is not None:
            parts.append(plant.sentence)
        parts.extend([more[1], _pick(_REPLY_CLOSERS, seed, "c", n)])
        reply = "".join(parts)
        if plant is not None and plant.ledger:
            # The ledger keeps the latest few entries only, as a scribe trimming its lists would.
            if plant.section == "事实账":
                items = [*items, plant.ledger][-LEDGER_KEEP:]
            else:
                threads = [*threads, plant.ledger][-LEDGER_KEEP:]
        ledger = {
            "time": when, "location": place,
            "characters": [{"name": CHAR, "affinity": min(100, 10 + n // 6), "status": "照常打理客栈",
                            "blurb": "青石镇客栈的掌柜"}],
            "items": list(items), "threads": list(threads),
        }
        swiped = None
        if n == reroll_beat:
            swiped = parts[0] + SWIPED_FACT[1] + parts[-1]
        out.append(SynthBeat(n, user, reply, ledger, swiped))
    swiped_fact = Fact(SWIPED_FACT[0], SWIPED_FACT[1], parse_match(SWIPED_FACT[2]), chat="synth",
                       beat=reroll_beat or None)
    return SynthChat(USER, CHAR, GREETING, tuple(out), facts, scenes, swiped_fact, reroll_beat)
