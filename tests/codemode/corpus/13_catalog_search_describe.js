const hits = await tools.search('weather forecast');
const tool = await tools.describe(hits[0].id);
const r = await tools.call(tool.id, { city: 'Lima' });
return { name: tool.name, required: tool.parameters.required, temp: r.details.tempC };
