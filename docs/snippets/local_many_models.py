from openai import OpenAI

client = OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="unused")
for model in client.models.list():
    print(model.id, model.model_extra["noctaya"]["state"])
for name in ("qwen", "coder"):
    stream = client.chat.completions.create(
        model=name,
        messages=[{"role": "user", "content": "Hello"}],
        stream=True,
        max_tokens=32,
    )
    print(f"{name}:", "".join(chunk.choices[0].delta.content or "" for chunk in stream))
