"""Stream one chat completion from a Noctaya gateway with the openai SDK."""

from openai import OpenAI

client = OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="not-needed-without-authentication")
stream = client.chat.completions.create(
    model="demo",
    messages=[{"role": "user", "content": "Hello"}],
    stream=True,
)
for chunk in stream:
    if chunk.choices:
        print(chunk.choices[0].delta.content or "", end="", flush=True)
print()
