const wait = ms => new Promise(resolve => setTimeout(resolve, ms));
const events = [];
setTimeout(() => events.push('b'), 20);
setTimeout(() => events.push('a'), 5);
await wait(40);
return events;
