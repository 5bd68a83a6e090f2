"""The built-in demo corpus, written by the project from hand-made phrase lists (no external dataset).

Four topics (sport, science, cooking, finance). Most sentences use one topic's vocabulary; some deliberately
mix two topics and some carry only a single weak cue, so a small encoder separates the classes well but not
perfectly and fine-tuning has something to improve. The documents file holds multi-sentence articles for
crop augmentation: every sentence is 100-250 characters, ends in '.', and contains no other '.'.

Regenerate with `python -m core.data.demo`; a fixed seed makes the output byte-identical on every run.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

from core.data.corpus import demo_corpus_path, demo_documents_path

SEED = 0
SENTENCES_PER_TOPIC = {"sport": 170, "science": 160, "cooking": 150, "finance": 165}
BRIDGES_PER_TOPIC = 28
VAGUE_PER_TOPIC = 18
DOCUMENTS_PER_TOPIC = 40
SENTENCE_CHARS = (100, 250)

SUBJECTS = {
    "sport": ["The striker", "Our goalkeeper", "The veteran coach", "A young sprinter", "The home team",
              "The tennis champion", "The rookie quarterback", "The cycling squad", "The captain",
              "The marathon runner", "The visiting side", "The boxer", "The relay team", "The midfielder",
              "The swimmer", "The basketball forward", "The cricket club", "The rowing crew", "The wrestler",
              "The volleyball team"],
    "science": ["The research team", "A graduate student", "The astronomers", "Our chemistry lab",
                "The geneticists", "A physicist", "The climate scientists", "The marine biologists",
                "The neuroscientist", "The rover", "The lab technician", "The virologists", "The geologists",
                "The ecologists", "A team of engineers", "The botanist", "The particle physicists",
                "The epidemiologists"],
    "cooking": ["The chef", "My grandmother", "The pastry cook", "The home baker", "The line cook",
                "Our neighbour", "The food blogger", "The sous chef", "The cookbook author", "The street vendor",
                "My uncle", "The caterer", "The cooking instructor", "The family cook", "The head baker"],
    "finance": ["The central bank", "The hedge fund", "The investment firm", "The startup", "The regional bank",
                "The brokerage", "The finance minister", "The pension fund", "The retailer", "The energy company",
                "The insurance company", "The trading desk", "The accountant", "The tech giant",
                "The asset manager", "The credit union", "The mortgage lender"],
}

ACTIONS = {
    "sport": ["scored a late winner", "broke the national record", "won the championship final",
              "missed a penalty", "defended the title", "trained twice a day", "dominated the second half",
              "lost in the semi-final", "equalised in stoppage time", "qualified for the playoffs",
              "pulled a hamstring", "set a personal best", "kept a clean sheet", "clinched the league",
              "came back from two sets down", "sprinted past the defenders", "led the comeback",
              "hit a home run", "crossed the finish line first", "was sent off for a reckless tackle",
              "won the toss and chose to bat", "threw the decisive touchdown pass"],
    "science": ["measured the decay rate", "sequenced the bacterial genome", "detected a faint signal",
                "published a new study", "observed a distant galaxy", "isolated a new protein",
                "tested the hypothesis", "mapped the ocean floor", "recorded neural activity",
                "synthesised a stable compound", "discovered a fossil", "calibrated the instruments",
                "modelled the rising temperatures", "replicated the experiment", "identified a gene mutation",
                "analysed the rock samples", "cooled the atoms", "tracked the migrating whales",
                "collected pollen from the glacier", "simulated the collision of two stars",
                "counted the cells under the microscope"],
    "cooking": ["roasted the vegetables", "kneaded the sourdough", "simmered the tomato sauce",
                "caramelised the onions", "whisked the egg whites", "seasoned the stew", "baked a lemon tart",
                "grilled the salmon", "folded in the flour", "marinated the chicken", "braised the short ribs",
                "toasted the spices", "rolled out fresh pasta", "fried the dumplings",
                "reduced the red wine sauce", "glazed the carrots with honey", "steamed the rice",
                "chopped the fresh herbs", "stirred the risotto", "pickled the cucumbers",
                "piped cream into the eclairs"],
    "finance": ["raised interest rates", "reported record quarterly profits", "cut its dividend",
                "issued new bonds", "lost money on currency bets", "approved the merger", "refinanced its debt",
                "beat earnings forecasts", "sold its shares", "raised fresh venture capital",
                "lowered its inflation outlook", "filed for bankruptcy", "bought back stock",
                "hedged against a weaker dollar", "audited the accounts", "priced the initial public offering",
                "revised the annual budget", "trimmed operating costs", "downgraded the bank's credit rating",
                "shifted its portfolio into government bonds", "wrote off a bad loan"],
}

SETTINGS = {
    "sport": ["in front of a packed stadium", "despite the heavy rain", "on the final lap",
              "after a tense overtime", "against their fiercest rivals", "at the world championships",
              "during the away match", "in the opening round", "under the floodlights", "at the Olympic trials",
              "before the halftime whistle", "in the local derby", "on the clay court", "at the training ground"],
    "science": ["in a peer-reviewed journal", "with an electron microscope", "using data from the satellite",
                "at near absolute zero", "under controlled conditions", "in the particle accelerator",
                "after years of field work", "in the Antarctic ice", "with surprising precision",
                "in laboratory mice", "across three independent trials", "at the observatory",
                "with a new gene editing tool", "in the deep sea"],
    "cooking": ["with plenty of garlic", "in a cast iron pan", "over a low flame", "until golden brown",
                "for a family dinner", "with a pinch of sea salt", "in the wood-fired oven",
                "for the holiday feast", "with smoked paprika", "just before serving",
                "for about forty minutes", "with butter and thyme", "in the tiny restaurant kitchen",
                "for the Sunday lunch"],
    "finance": ["after a volatile week on the markets", "despite rising inflation", "in the third quarter",
                "to reassure nervous investors", "as bond yields climbed", "ahead of the annual meeting",
                "amid fears of a recession", "on Wall Street", "before the markets closed",
                "according to the latest filing", "for the fiscal year", "as the stock price tumbled",
                "after the currency slumped", "under pressure from regulators"],
}

SENTENCE_FRAMES = [
    "{S} {A} {M}.",
    "{M_}, {s} {A}.",
    "{S} {A} and then {A2} {M}.",
    "Everyone was surprised when {s} {A} {M}.",
    "According to reports, {s} {A} {M}.",
    "{S} finally {A} {M}.",
    "Last night {s} {A} {M}.",
    "It is rare that {s} {A} {M}.",
    "{S} {A}, and a week later {s2} {A2}.",
    "Yesterday {s} {A} {M}.",
]

# Texts that borrow a second topic's vocabulary but belong to the first: (label, subjects, actions, settings).
BRIDGES = [
    ("sport", ["The club", "The team owner", "The football league", "The tennis federation"],
     ["paid a record transfer fee", "signed a lucrative sponsorship deal", "raised ticket prices",
      "cut player salaries"],
     ["before the new season", "to keep its star player", "after a disappointing campaign",
      "despite the club's mounting debt"]),
    ("finance", ["The sportswear maker", "The betting company", "The broadcaster", "The stadium operator"],
     ["reported higher profits", "saw its shares jump", "raised its revenue forecast",
      "paid a record sum for the television rights"],
     ["after the championship final", "during the football season", "thanks to the Olympic games",
      "as the tournament drew huge crowds"]),
    ("cooking", ["The chef", "The baker", "The pastry cook", "The ice cream maker"],
     ["measured the dough temperature precisely", "tested how long the yeast takes to ferment",
      "used liquid nitrogen to freeze the sorbet", "studied the chemistry of caramel"],
     ["before baking the bread", "for the new dessert menu", "in the restaurant kitchen",
      "to get a crisper crust"]),
    ("science", ["Food scientists", "The microbiologists", "The chemists", "The nutrition researchers"],
     ["analysed the bacteria in sourdough starters", "measured the sugar content of ripe fruit",
      "studied how proteins change when eggs are cooked", "tested the effect of salt on boiling water"],
     ["in a controlled trial", "in the laboratory", "using a mass spectrometer", "across hundreds of samples"]),
    ("sport", ["The sprinter", "The cycling team", "The rowing crew", "The decathlete"],
     ["wore sensors to track heart rate", "used wind tunnel data to adjust their position",
      "followed a strict altitude training plan", "had their blood oxygen measured"],
     ["before the race", "ahead of the world championships", "during the winter camp",
      "after every training session"]),
    ("science", ["Sports scientists", "The physiologists", "Researchers", "The biomechanics group"],
     ["measured muscle fatigue in marathon runners", "studied concussions in rugby players",
      "tested how lactic acid builds up in sprinters", "filmed the swing of professional golfers"],
     ["in a new study", "using motion capture", "in a university lab", "over a full season"]),
    ("finance", ["The restaurant chain", "The food delivery startup", "The grocery retailer",
                 "The coffee company"],
     ["reported falling profits", "raised menu prices to cover costs", "saw its shares drop",
      "borrowed money to expand"],
     ["as food inflation rose", "after a weak quarter", "despite strong demand for takeaway meals",
      "as the price of wheat climbed"]),
    ("cooking", ["The chef", "The home cook", "The baker", "The student"],
     ["cut costs by using cheaper cuts of meat", "made a budget dinner for four",
      "priced every ingredient in the recipe", "cooked a week of meals from one shopping trip"],
     ["for under ten dollars", "for the weekly menu", "to save money this month", "on a tight budget"]),
]
BRIDGE_FRAMES = ["{S} {A} {M}.", "{M_}, {s} {A}.", "Last week {s} {A} {M}."]

# A single weak cue word in a frame that fits every topic.
VAGUE_CUES = {
    "sport": ["season", "match", "race", "training session", "game", "tournament"],
    "science": ["experiment", "study", "observation run", "lab session", "field trip", "survey"],
    "cooking": ["dinner service", "bake", "meal", "cooking class", "recipe test", "banquet"],
    "finance": ["quarter", "trading day", "audit", "budget meeting", "earnings call", "funding round"],
}
VAGUE_FRAMES = [
    "It was a long {c} and everyone was tired by the end.",
    "Nobody expected the {c} to go so badly.",
    "The results of the {c} were better than we hoped.",
    "We spent the whole weekend preparing for the {c}.",
    "After the {c}, the team met to discuss what went wrong.",
    "Everyone agreed that the {c} was a complete success.",
    "The {c} was postponed because of the storm.",
    "I still think about that {c} from last year.",
]

# Documents: each has one protagonist that recurs, so two crops of a document share more than the topic.
PROTAGONISTS = {
    "sport": [f"the {town} {mascot}" for town in ("Riverside", "Northgate", "Ashford", "Millbrook", "Kingsport",
                                                  "Eastfield", "Stonebridge", "Westmere", "Oakdale", "Harbourside")
              for mascot in ("Rovers", "Falcons", "Wolves", "Harriers", "Comets", "Pirates")],
    "science": [f"the {group} at {place}" for place in ("Halden Institute", "Brightwater University",
                                                        "Carrow Observatory", "Linden Research Centre",
                                                        "Marlow Polar Station", "Fenwick College",
                                                        "Tessaly Marine Laboratory")
                for group in ("genetics group", "physics team", "climate unit", "field team", "imaging lab",
                              "ecology group")],
    "cooking": [f"{cook} at {place}" for place in ("the Copper Pot", "Juniper House", "the Old Mill bakery",
                                                  "Saffron Street Kitchen", "the harbour canteen", "Villa Rosa",
                                                  "the Lantern noodle bar")
                for cook in ("the head chef", "the pastry team", "the night cook", "the owner",
                             "the new apprentice", "the family in charge")],
    "finance": [f"{name} {kind}" for name in ("Northwind", "Bluepeak", "Corvid", "Tallis", "Greystone",
                                              "Meridian", "Ironleaf")
                for kind in ("Capital", "Bank", "Insurance", "Holdings", "Retail Group", "Pension Trust")],
}
FOLLOW_UPS = {
    "sport": ["which pleased the travelling supporters", "which left the coach with a selection headache",
              "which moved the side up to third in the table", "although the fitness staff urged caution",
              "while the fans sang until long after the final whistle",
              "and the local paper called it the best display in years",
              "though the manager insisted there was still work to do"],
    "science": ["which the reviewers called a careful piece of work", "although the sample size was small",
                "and the results will be shared with other labs next year",
                "which could change how the field thinks about the problem",
                "while the funding agency asked for a follow-up study",
                "though several colleagues remain sceptical of the method",
                "and the raw data has been made openly available"],
    "cooking": ["which the regular customers ordered again the next day", "although the kitchen ran out of butter",
                "and the smell drifted all the way down the street",
                "which earned a warm review in the weekend paper",
                "while the apprentices took careful notes on every step",
                "though the portions were smaller than usual",
                "and the leftovers became a soup the following morning"],
    "finance": ["which pushed the share price to a yearly high", "although analysts warned about rising debt",
                "and the board promised a clearer strategy by spring",
                "which surprised the bond market", "while regulators asked for more detailed disclosures",
                "though margins remain under pressure",
                "and several large investors trimmed their positions"],
}
DOC_FRAMES = [
    "{P_} {A} {M}, {F}.",
    "Earlier this year {P} {A} {M}, and soon afterwards the same people {A2} {M2}.",
    "According to people close to {P}, the group {A} {M}, {F}.",
    "{M_}, {P} {A}, {F}.",
    "It was the second time that {P} {A} {M}, {F}.",
    "Looking back on the year, {P} {A} {M} and {A2}, {F}.",
]


def _lower_first(s: str) -> str:
    """Lower-case the first letter so a sentence-initial phrase can sit mid-sentence ('The club' -> 'the club')."""
    return s[:1].lower() + s[1:]


def _upper_first(s: str) -> str:
    return s[:1].upper() + s[1:]


def _topic_sentence(rng: random.Random, topic: str) -> str:
    subj, subj2 = rng.sample(SUBJECTS[topic], 2)
    act, act2 = rng.sample(ACTIONS[topic], 2)
    setting = rng.choice(SETTINGS[topic])
    return rng.choice(SENTENCE_FRAMES).format(S=subj, s=_lower_first(subj), s2=_lower_first(subj2), A=act,
                                              A2=act2, M=setting, M_=_upper_first(setting))


def _bridge_sentence(rng: random.Random, subjects: list[str], actions: list[str], settings: list[str]) -> str:
    subj, act, setting = rng.choice(subjects), rng.choice(actions), rng.choice(settings)
    return rng.choice(BRIDGE_FRAMES).format(S=subj, s=_lower_first(subj), A=act, M=setting,
                                            M_=_upper_first(setting))


def _unique(make, n: int) -> list[str]:
    """Draw until n distinct strings exist; the phrase lists allow far more combinations than needed."""
    seen: dict[str, None] = {}
    for _ in range(n * 200):
        seen.setdefault(make(), None)
        if len(seen) == n:
            return list(seen)
    raise RuntimeError(f"phrase lists too small for {n} distinct texts")


def demo_rows(seed: int = SEED) -> list[tuple[str, str]]:
    """(text, label) rows of the short-text demo corpus, shuffled."""
    rng = random.Random(seed)
    rows: list[tuple[str, str]] = []
    for topic, n in SENTENCES_PER_TOPIC.items():
        rows += [(t, topic) for t in _unique(lambda: _topic_sentence(rng, topic), n)]
    for topic in SENTENCES_PER_TOPIC:
        bridges = [b[1:] for b in BRIDGES if b[0] == topic]
        make = lambda: _bridge_sentence(rng, *rng.choice(bridges))  # noqa: E731
        rows += [(t, topic) for t in _unique(make, BRIDGES_PER_TOPIC)]
        vague = [f.format(c=c) for f in VAGUE_FRAMES for c in VAGUE_CUES[topic]]
        rows += [(t, topic) for t in rng.sample(vague, VAGUE_PER_TOPIC)]
    rng.shuffle(rows)
    return rows


def _document_sentence(rng: random.Random, topic: str, protagonist: str) -> str:
    """One sentence of 100-250 characters with no '.' inside, so splitting on '.' recovers it."""
    lo, hi = SENTENCE_CHARS
    while True:
        act, act2 = rng.sample(ACTIONS[topic], 2)
        setting, setting2 = rng.sample(SETTINGS[topic], 2)
        s = rng.choice(DOC_FRAMES).format(P=protagonist, P_=_upper_first(protagonist), A=act, A2=act2, M=setting,
                                          M2=setting2, M_=_upper_first(setting), F=rng.choice(FOLLOW_UPS[topic]))
        if lo + 5 <= len(s) <= hi - 5 and s.count(".") == 1:
            return s


def demo_documents(seed: int = SEED) -> list[tuple[str, str]]:
    """(document, topic) rows: 4 to 7 distinct sentences about one protagonist each."""
    rng = random.Random(seed + 1)
    docs: list[tuple[str, str]] = []
    for topic, names in PROTAGONISTS.items():
        for protagonist in rng.sample(names, DOCUMENTS_PER_TOPIC):
            n = rng.randint(4, 7)
            sentences = _unique(lambda: _document_sentence(rng, topic, protagonist), n)
            docs.append((" ".join(sentences), topic))
    rng.shuffle(docs)
    return docs


def _write_csv(path: Path, rows: list[tuple[str, str]]) -> None:
    """Write to a temp file and rename, so a crash never leaves half a demo file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    tmp.replace(path)


def write_demo(out_dir: Path | None = None) -> tuple[Path, Path]:
    """Write both demo CSVs (into assets/ unless out_dir is given) and return their paths."""
    corpus_path = Path(out_dir) / demo_corpus_path().name if out_dir else demo_corpus_path()
    documents_path = Path(out_dir) / demo_documents_path().name if out_dir else demo_documents_path()
    _write_csv(corpus_path, demo_rows())
    _write_csv(documents_path, demo_documents())
    return corpus_path, documents_path


if __name__ == "__main__":
    for written in write_demo():
        print(f"wrote {written}")
