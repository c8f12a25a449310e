"""AMemGym's state-revealing simulated user (``user`` role): it continues a session after the
assistant's answer.

It sees exactly what the reference simulator sees (``env/sample_interactions.py``): the profile's
``formatted_str`` labelled with the user's ``start_time``, the current date (the period's end, date
only), the session's time-prefixed first message, the last two messages of the session, and the
state schema labelled "DO NOT reveal values". It never sees the state, the exposed states or the
checkpoint questions, so only a session's first message carries state information. It must
continue (no early stop); its reply is stripped, as in the reference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mnemoflow.data.amemgym import AmemUser
from mnemoflow.llm.types import ChatRequest

ROLE = "user"
TASK = "amemgym_user_followup"

FOLLOWUP_PROMPT = """You are simulating a user in a conversation with an AI assistant. You must \
continue the conversation: ending it early is not allowed.

Initial User Profile on ({start_time}):
{profile}

Current Date: {current_date}

Initial Query: {initial_query}

Recent Conversation (including the latest assistant response):
{recent}

Information You Can Reveal:
Anything that is NOT one of the tracked state variables in the schema below and that cannot help \
identify the value of any of them.

Full Schema (DO NOT reveal values for variables in this schema):
{schema}

Instructions:
1. You MUST continue the conversation; do not end it.
2. If the assistant asked for clarification, answer it with information you may reveal (see above);
   do not volunteer further personal information, and do not repeat what the initial query said.
3. If your initial query seems addressed, ask a natural follow-up that extends the conversation
   (related topics, practical details, alternatives, or clarification of a specific point).
4. Stay conversational and consistent with your persona.
5. Never reveal, hint at or confirm the value of any variable in the schema.
Examples of good follow-ups: "That's helpful! Could you also tell me about...", "Thanks for that \
information. I'm also curious about...", "That makes sense. What about...".

Reply with the follow-up message only, no formatting or explanation."""


@dataclass
class StateRevealingUser:
    """The simulated user of one (user, period): :meth:`next_message` continues a session."""

    user: AmemUser
    current_date: str  # the period's end (date only)
    gateway: object

    def request(self, history: list) -> ChatRequest:
        """The request for the next user turn, built only from what the user may see.

        ``history`` holds the session's turns (objects with ``role``, ``content``, ``round``),
        ending on the assistant's answer.
        """
        initial = history[0].content
        recent = [{"role": t.role, "content": t.content} for t in history[-2:]]
        lines = "\n".join(f"{m['role'].title()}: {m['content']}" for m in recent)
        schema = json.dumps(self.user.schema, indent=2, ensure_ascii=False)
        prompt = FOLLOWUP_PROMPT.format(
            start_time=self.user.start_time,
            profile=self.user.profile_text,
            current_date=self.current_date,
            initial_query=initial,
            recent=lines,
            schema=schema,
        )
        return ChatRequest(
            role=ROLE,
            task=TASK,
            messages=[{"role": "user", "content": prompt}],
            fields={
                "profile": self.user.profile_text,
                "start_time": self.user.start_time,
                "current_date": self.current_date,
                "initial_query": initial,
                "recent": recent,
                "schema_types": sorted(self.user.schema),
                "round": history[-1].round + 1,
            },
        )

    async def next_message(self, history: list) -> str:
        """The next user message (the protocol wraps it into a conversation turn)."""
        answer = await self.gateway.chat(self.request(history))
        return answer.text.strip()
