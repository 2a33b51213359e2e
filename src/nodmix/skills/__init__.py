"""Skills: folders with a `SKILL.md` that teach the agent a procedure, offered when eligible.

Discovery (`discovery.py`, cached by mtimes), front matter (`frontmatter.py`, YAML), gating
(`gating.py`), the verdicts for one agent (`book.py`), the system-prompt lines (`prompt.py`),
the code-mode `skills` namespace (`tools.py`) and install/remove (`install.py`).
"""

from nodmix.skills.book import BUNDLED_DIR, SkillBook, SkillReview, managed_dir
from nodmix.skills.discovery import Discovery, SkillLocation, SkillScanner
from nodmix.skills.frontmatter import SkillFormatError, parse_skill
from nodmix.skills.model import Requirements, Skill, SkillStatus
from nodmix.skills.prompt import skills_section

__all__ = [
    "BUNDLED_DIR",
    "Discovery",
    "Requirements",
    "Skill",
    "SkillBook",
    "SkillFormatError",
    "SkillLocation",
    "SkillReview",
    "SkillScanner",
    "SkillStatus",
    "managed_dir",
    "parse_skill",
    "skills_section",
]
