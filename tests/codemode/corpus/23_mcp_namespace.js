const r = await MCP.time.convertTime({
  source_timezone: 'UTC', time: '09:30', target_timezone: 'Asia/Tokyo',
});
const data = r.structuredContent ?? JSON.parse(r.content[0].text);
return data.target.datetime.slice(11, 16);
