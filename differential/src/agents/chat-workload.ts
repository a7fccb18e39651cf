/**
 * `AiChatWorkload`, the `workload: chat` player with `host: chat` on the real SDK
 * (`scenarios/workloads/chat.py` in the port): the SDK's own `AIChatAgent` (`HarnessedChatAgent`
 * in `chat-child.ts`) answering from the scripted model, its own service (`model/<alias>`) when
 * the scenario gives the workload a model. `say(text)` sends the text as a user message through
 * the SDK's `saveMessages` and, once the turn ended, records `workload:answered {requestId,
 * status, text}` (the text of the last assistant message the turn added, '' when none) and
 * returns the same, as the port's `say` does.
 */
import type { Json } from "../harness";
import { HarnessedChatAgent } from "./chat-child";

interface UiMessage {
  id: string;
  role: string;
  parts: { type: string; text?: string }[];
}

/** The message's text parts joined (the port's `message_text`). */
function messageText(message: UiMessage): string {
  return message.parts
    .filter((part) => part?.type === "text")
    .map((part) => part.text ?? "")
    .join("");
}

export class AiChatWorkload extends HarnessedChatAgent {
  async say(text: string): Promise<Json> {
    const before = this.messages.length;
    const message: UiMessage = {
      id: crypto.randomUUID(),
      role: "user",
      parts: [{ type: "text", text }]
    };
    const result = (await this.saveMessages([message as never])) as unknown as {
      requestId: string;
      status: string;
      error?: string;
    };
    const answers = (this.messages.slice(before) as unknown as UiMessage[]).filter(
      (m) => m.role === "assistant"
    );
    const answer = answers.length ? messageText(answers[answers.length - 1]) : "";
    this.trace("workload:answered", {
      requestId: result.requestId,
      status: result.status,
      text: answer
    });
    return JSON.parse(JSON.stringify({ ...result, text: answer })) as Json;
  }
}
