/**
 * The frames of a Server-Sent Events response, as field → value (comment lines dropped), until
 * the body ends. The caller stops early by breaking out of the loop (the reader is released).
 */
export async function* sseFrames(res: Response): AsyncGenerator<Record<string, string>> {
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = res.body!.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const fields: Record<string, string> = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          fields[line.slice(0, colon)] = line.slice(colon + 1).trimStart();
        }
        yield fields;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
