const text = (await tools.search_docs({ query: 'unicode' })).text;
const bytes = new TextEncoder().encode(text);
const b64 = btoa(String.fromCharCode(...bytes));
const back = new TextDecoder().decode(Uint8Array.from(atob(b64), c => c.charCodeAt(0)));
return { chars: text.length, bytes: bytes.length, roundTrip: back === text };
