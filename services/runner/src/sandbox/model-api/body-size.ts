/**
 * Whether a JSON text holds more than `max` objects and arrays, counted by one pass over its bytes
 * (brackets inside strings are not counted), before anything is parsed.
 */
export function exceedsContainers(text: Buffer, max: number): boolean {
  let count = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const byte = text[i];
    if (inString) {
      if (byte === 0x5c) i++;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if ((byte === 0x7b || byte === 0x5b) && ++count > max) {
      return true;
    }
  }
  return false;
}
