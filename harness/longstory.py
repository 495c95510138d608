"""A long chat generated from a seed: forty-odd days at the fog-harbour lighthouse.

Invariant: :func:`generate_beats` is a pure function of its parameters. The same
``seed`` and ``days`` always give the same beats, byte for byte (``random.Random(seed)``
picks the daily chores and the weather; the plot events sit on fixed days). Every
sentence below was written by hand for this project; nothing here is model output.

Each beat is one day: the user's line (weather, chore, and the day's event if any), the
keeper's reply, and the ledger after the day.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from liyuan.errors import ConfigError

from .scenario import Beat

__all__ = ["EVENTS", "generate_beats", "zh_number"]

_DIGITS = "零一二三四五六七八九"


def zh_number(n: int) -> str:
    """1..99 in Chinese numerals (十三, 二十, 四十二)."""
    if not 0 < n < 100:
        raise ValueError(n)
    tens, ones = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else _DIGITS[tens] + "十")
    return head + (_DIGITS[ones] if ones else "")


_WEATHER = [
    ("晴，海面发亮，远处能看见渡口的白帆", "晴"), ("起了薄雾，礁石只露出黑黑的脊背", "薄雾"),
    ("阴天，风从北边来，窗缝里呜呜地响", "阴"), ("下了一阵冷雨，楼梯间里全是潮气", "冷雨"),
    ("大雾，看不清十米外，雾笛响了一整天", "大雾"), ("风小了，浪还很高，一下下拍着塔基", "风小浪高"),
]

# (what the user does, three ways the keeper answers, where it happens)
_CHORES = [
    ("我拿着麂皮一圈圈擦透镜上的盐霜。",
     ("擦到第三圈就换块布，盐霜会把玻璃划花。", "（她用指节敲了敲透镜）这一块你漏了。",
      "透镜比你值钱，手轻一点。"), "顶层灯室"),
    ("我去礁石边记潮位，回来把数字抄进本子。",
     ("潮位写两遍，一遍写本子上，一遍写门后的木板上。本子会丢，木板不会。",
      "（她扫了一眼本子）比昨天高了两寸，夜里要起风。", "礁石边的青苔滑，下回穿我那双胶靴。"),
     "灯塔外的礁石"),
    ("我坐在门口补那张破了洞的渔网。",
     ("网眼打死结，活结一泡水就松。", "（她蹲下来替你扯紧一个结）这样。", "补完挂到后墙上晾着，别堆在地上。"),
     "灯塔门口"),
    ("我把后院那堆浮木劈成柴。",
     ("湿的那半堆别劈，先晾着，劈了也烧不着。", "斧子往下落的时候别看手，看木头的纹。",
      "（她抱走一捆柴）够烧三天了。"), "灯塔后院"),
    ("我给油桶换上新的密封圈。",
     ("拧到手腕发酸就停，再拧，桶口会裂。", "换下来的旧圈别扔，夜里点灯时垫在油壶底下。",
      "（她拎了拎油桶）还剩大半桶，撑得到下一趟补给船。"), "一楼储藏间"),
    ("我把螺旋楼梯松动的扶手一根根钉紧。",
     ("第二十七级那根别动。", "钉子斜着进，正着钉会把木头撑裂。", "（她在楼梯口听了一会儿）不响了。"),
     "螺旋楼梯"),
    ("我趴在桌上画这一段海岸线的草图。",
     ("北湾那道弯画得太圆了，实际上是个折角。", "（她用铅笔在图边点了一下）这里还有块暗礁，退大潮才露头。",
      "画完压在镇纸底下，海风一吹就卷。"), "一楼厨房"),
    ("我熬了一锅鱼汤，端了一碗给她。",
     ("盐放多了。（她还是喝完了）", "（她捧着碗暖手）鱼是周伯上回带来的那条？", "下回姜多放两片。"),
     "一楼厨房"),
    ("我上到塔顶，清理栏杆上的鸟粪。",
     ("系好绳子再探身，去年有个修灯的就是这么掉下去的。", "（她在下面喊）北边那截栏杆锈了，别靠。",
      "鸟粪用热水泡开再铲，干铲会把漆一起铲掉。"), "塔顶栏杆"),
    ("我检查了一遍避雷针的接地线。",
     ("接地线锈了一截，下回补给船来，让周伯带一卷铜线。", "（她仰头看了看云）今晚不会打雷，明天再弄。",
      "接头缠三层胶布，缠两层的那年被雷劈过一回。"), "塔顶"),
]

# the night watch, in the user's words and in the keeper's
_NIGHT_USER = [
    "夜里两点到四点是我的班，我一边摇转盘一边数浪。",
    "轮到我值夜，我把马灯挂在曲柄旁边，听着外头的雾笛。",
    "值夜的时候，我在本子上记下了三条过往船只的灯号。",
    "下半夜我守着灯，困了就去看一眼油壶里的油线。",
    "我值完班下楼，看见厨房的炉子还给我留着火。",
    "夜班很静，只有透镜转过一圈时咔哒响一下。",
]
_NIGHT_KEEPER = [
    "（她交班前照例看了一眼油壶）油线还在第二道刻度。睡不着就数灯，一圈十二秒。",
    "下半夜起风的话，叫醒我，别自己上塔顶。",
    "（她把值班本推过来）签上名字和时辰，字写工整，这本子是要交上去的。",
    "明早五点熄灯，熄完把灯罩擦一遍再睡。",
    "（她抱着胳膊站在楼梯口）雾笛响三长一短，是渔船在问路，你就多摇两圈。",
    "灯芯剪平了再交班，剪歪了火苗会跳。",
]

# day -> (what the user adds, what the keeper says or does, items gained, thread opened)
EVENTS: dict[int, tuple[str, str, tuple[str, ...], str | None]] = {
    1: ("“我想留下来，帮你守一个月的灯。”",
        "（林溯盯着你看了很久，从抽屉里抽出一张发黄的值班表）一个月。夜里两点到四点归你。",
        ("值班表",), "阿简留下来守灯一个月"),
    3: ("我在礁石缝里捡到一枚铜纽扣，上面刻着一个「鸥」字，拿去给她看。",
        "（林溯看了一眼，手指在那个字上停了停）收好，别弄丢。",
        ("刻着「鸥」字的铜纽扣",), "铜纽扣上的「鸥」字"),
    5: ("傍晚电台终于修好了，沙沙声里传来渡口的天气预报。",
        "（林溯靠在门框上听完了整段预报）比我想的快。明天夜里教你点灯，说话算话。",
        (), None),
    8: ("夜里她真的带我上了灯室，教我点灯。",
        "先预热灯芯三分钟，再开油阀，顺序反了，整个灯罩都会熏黑。记住了？",
        (), None),
    11: ("补给船海鹞号靠岸，船老大周伯塞给我一封没有署名的信，说是给守灯人的。",
         "（林溯拆开信，里面只有一行字：「七号浮标，别再点。」她把信折好，塞进了围裙口袋）不关你的事。",
         ("周伯转交的无名信（在林溯手里）",), "无名信：「七号浮标，别再点。」"),
    13: ("我划小艇去北礁一带测水深，量出来只有四米二。",
         "四米二。（她重复了一遍）大船过不去。你在海图上记清楚。",
         (), "北礁水深只有四米二"),
    17: ("林溯发起高烧，我让她躺下，自己一个人守了一整夜的灯。",
         "（天亮时她醒过来，看见你靠在曲柄上打盹，把自己的大衣盖在你身上，一句话也没说）",
         (), None),
    20: ("值夜时她忽然开口，讲起她父亲。",
         "他也是守灯人。二十年前的秋天，他开着小艇去北礁，再也没回来。那天七号浮标是亮的。",
         (), "林溯的父亲二十年前在北礁失踪"),
    23: ("一只海鸥撞上灯室的玻璃，撞出一道裂缝。",
         "（林溯用胶布把裂缝一层层糊上）撑到下个月补给船来。别告诉周伯，他嘴碎。",
         (), "灯室玻璃的裂缝用胶布糊着"),
    24: ("我问她，楼梯第二十七级那根扶手为什么不能动。",
         "那是我父亲钉的。他留下的东西不多，还有一块旧怀表，我打算哪天把它沉进北礁，还给他。",
         (), None),
    27: ("半夜起了大风暴，灯熄了。",
         "（黑暗里她抓住你的手腕）别慌，点灯的顺序还记得吗？……好，你点火，我摇转盘。"
         "（灯熄了四十分钟，你们轮流手摇转盘，一直摇到天亮）",
         (), None),
    31: ("我把这些天量到的数据对了一遍，在海图上标出七号浮标真正该在的位置：北礁东侧三百米。",
         "（林溯看着那个标记，很久才说）原来差了这么多。", (), "七号浮标的真实位置：北礁东侧三百米"),
    34: ("周伯这趟来，压低声音说，镇上有人打听灯塔里是不是住了个外人。",
         "让他们打听。（她把门闩插上）这几天夜里你别一个人上塔顶。", (), "镇上有人打听阿简"),
    38: ("她把一张折了好几道的纸递给我：是航标日志上被撕掉的那一页。",
         "（纸上是她父亲最后一次值班的记录，末尾一行写着：七号浮标移位，已报，未复。）你想知道的，都在这儿了。",
         ("日志残页（林溯父亲最后一次值班的记录）",), "日志残页：七号浮标移位，已报，未复"),
    40: ("一个月到了，海鹞号来接我。我站在码头上，对她说：“我想再留一个月。”",
         "（林溯没回头，把值班表翻到下一页）夜里两点到四点，还是归你。", (), None),
}


def _int(params: Mapping[str, Any], key: str, where: str, low: int, high: int) -> int:
    value = params.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ConfigError(f"{where}.{key}: 应该是 {low} 到 {high} 之间的整数")
    return value


def generate_beats(params: Mapping[str, Any], *, where: str = "generate") -> tuple[Beat, ...]:
    """The beats of the lighthouse month.

    Args:
        params: ``{"seed": int, "days": int}`` from the scenario (``days`` 1..60).
        where: Field path for error messages.

    Raises:
        ConfigError: Unknown or out-of-range parameters.
    """
    unknown = sorted(set(params) - {"seed", "days"})
    if unknown:
        raise ConfigError(f"{where}: 未知字段 {', '.join(unknown)}（可用：seed、days）")
    seed = _int(params, "seed", where, 0, 2**31)
    days = _int(params, "days", where, 1, 60)
    rng = random.Random(seed)
    previous = -1
    items: list[str] = ["海图", "测距仪"]
    threads: list[str] = []
    beats = []
    for day in range(1, days + 1):
        weather_text, weather_flag = rng.choice(_WEATHER)
        # Never the same chore two days running: a long chat should not read like a loop.
        choice = rng.choice([i for i in range(len(_CHORES)) if i != previous])
        previous = choice
        chore_user, answers, place = _CHORES[choice]
        event = EVENTS.get(day)
        user = f"（第{zh_number(day)}天，{weather_text}）{chore_user}"
        reply = rng.choice(answers)
        if event is not None:
            user += event[0]
            reply += event[1]
            items.extend(event[2])
            if event[3]:
                threads.append(event[3])
        user += rng.choice(_NIGHT_USER)
        reply += rng.choice(_NIGHT_KEEPER)
        ledger = {
            "time": f"第{zh_number(day)}天夜里",
            "location": place,
            "characters": [{"name": "林溯", "affinity": min(100, 30 + day * 2), "status": "守灯",
                            "note": "称阿简为“测绘的”", "blurb": "雾港灯塔的守灯人"}],
            "items": list(items),
            "flags": {"天气": weather_flag, "守灯天数": str(day)},
            "threads": threads[-6:],
        }
        beats.append(Beat(user=user, reply=reply, ledger=ledger))
    return tuple(beats)
